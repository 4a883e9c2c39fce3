//! The local frontier: a whole crawl in one process, held in memory, for
//! `crawlworker run --local`. It keeps the Redis frontier's semantics, step
//! for step, so a spider crawled locally finds what a cluster finds:
//!
//! - the queue orders by priority, then first in, first out (the same
//!   score as the scripts' `queue_score`);
//! - the dupefilter holds the same request fingerprints (exact: a set);
//! - leasing reserves each host's politeness slot (interval, jitter,
//!   Crawl-delay, adaptive back-off) and leaves a request queued when its
//!   host's slot is further away than a lease may wait, as `lease_requests`
//!   in `scripts/prelude.lua` does; `max_pages` and `max_pages_per_host`
//!   are enforced there too;
//! - a commit writes a page's items, queues its new requests, records a
//!   failure, a dead letter or a retry (which waits here, not in the
//!   worker), adjusts its host's back-off and schedules a revisit, as
//!   `scripts/commit.lua` does;
//! - start entries come from the command line, a file or standard input,
//!   and are claimed as from a start key.
//!
//! Items go to a JSON Lines writer (a file or standard output), one line
//! per item, written in the page's commit. Nothing is shared with another
//! process: links handed to other spiders (`to_spider`) have nowhere to
//! go, and such spiders are refused in local mode (see
//! [`LocalFrontier::new`]).

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::io::Write;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::host_news::{HostNews, HostState};
use super::{
    Claimed, Committed, DeadLetter, FailedRecord, Leased, Options, PageResult, QueueStatus,
    Refused, Revisit, RobotsRecord, StartClaim, MAX_PRIORITY,
};
use crate::request::Request;
use crate::stats::{self, Tally};

/// A queue position: higher priority first, then first in, first out.
type Place = (i64, u64);

/// Where a local crawl's items go.
pub type ItemWriter = Box<dyn Write + Send>;

/// One spider's crawl, in memory.
pub struct LocalFrontier {
    options: Options,
    state: Mutex<State>,
    /// Woken when work is queued, or the crawl may have drained.
    wake: Arc<Notify>,
}

#[derive(Default)]
struct State {
    start: VecDeque<String>,
    queue: BTreeMap<Place, Request>,
    /// Leased requests by id, with their queue place (to hand them back).
    inflight: HashMap<String, (Place, Request)>,
    seen: HashSet<String>,
    next_seq: u64,
    /// Retries waiting for their time: (due ms, seq) → place and request.
    delayed: BTreeMap<(u64, u64), (Place, Request)>,
    /// Revisits: fingerprint → (due ms, request), and the due order.
    schedule: HashMap<String, (u64, Request)>,
    schedule_order: BTreeMap<(u64, String), ()>,
    hosts: HashMap<String, HostState>,
    /// Pages leased per host (for `max_pages_per_host`).
    host_pages: HashMap<String, u64>,
    robots: HashMap<String, RobotsRecord>,
    stats: BTreeMap<String, StatValue>,
    dead: Vec<DeadLetter>,
    failed: Vec<FailedRecord>,
    items: u64,
    page_limit_reached: bool,
    /// When the first request left queued for its host's slot may be
    /// leased, as the last lease saw.
    next_due: Option<Instant>,
    sink: Option<ItemWriter>,
    /// A write to the sink failed: the crawl stops leasing, and says why.
    sink_error: Option<String>,
    jitter_salt: u64,
}

#[derive(Debug, Clone, PartialEq)]
enum StatValue {
    Count(i64),
    Text(String),
}

impl std::fmt::Display for StatValue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StatValue::Count(n) => write!(f, "{n}"),
            StatValue::Text(t) => f.write_str(t),
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl LocalFrontier {
    /// A local crawl of the spider `options` describes, starting from
    /// `start` entries, its items written to `sink`.
    pub fn new(options: Options, start: Vec<String>, sink: ItemWriter) -> LocalFrontier {
        let state = State {
            start: start.into(),
            sink: Some(sink),
            ..State::default()
        };
        LocalFrontier {
            options,
            state: Mutex::new(state),
            wake: Arc::default(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (each step
        // is done whole before anything else reads it).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds start entries, after those already waiting.
    pub fn push_start(&self, entries: &[String]) -> u64 {
        let mut s = self.state();
        s.start.extend(entries.iter().cloned());
        drop(s);
        self.wake.notify_one();
        entries.len() as u64
    }

    /// Queues the spider's sitemaps and feeds (`[start] sitemap`, `feed`).
    pub fn seed(&self, seeds: &[Request]) {
        let mut s = self.state();
        let queued = seeds.iter().filter(|r| s.enqueue(r)).count();
        s.add(stats::SCHEDULER_ENQUEUED.name, queued as i64);
    }

    /// What wakes an idle spider.
    pub fn wake(&self) -> Arc<Notify> {
        self.wake.clone()
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    fn max_wait_ms(&self) -> u64 {
        super::max_wait(self.options.lease).as_millis() as u64
    }

    /// Leases up to `max` requests; when fewer are queued, also returns up
    /// to `peek` start entries to claim.
    pub fn lease(&self, max: usize, peek: usize) -> (Vec<Leased>, Vec<String>) {
        let mut s = self.state();
        let now = now_ms();
        s.release_due(now);
        let out = self.lease_requests(&mut s, max, now);
        let start = if out.len() < max || max == 0 {
            s.start.iter().take(peek).cloned().collect()
        } else {
            Vec::new()
        };
        (out, start)
    }

    /// How long until work nothing announces may be due: a retry, a
    /// revisit, or a request left queued for its host's slot.
    pub fn next_due_in(&self) -> Option<Duration> {
        let s = self.state();
        let now = now_ms();
        let clock = |ms: u64| Instant::now() + Duration::from_millis(ms.saturating_sub(now));
        [
            s.next_due,
            s.delayed.keys().next().map(|(due, _)| clock(*due)),
            s.schedule_order.keys().next().map(|(due, _)| clock(*due)),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(Instant::now()))
    }

    fn lease_requests(&self, s: &mut State, max: usize, now: u64) -> Vec<Leased> {
        let mut out = Vec::new();
        s.next_due = None;
        if max == 0 || s.sink_error.is_some() {
            return out;
        }
        let mut max = max;
        let quota = self.options.quota;
        if quota.max_pages > 0 {
            let used =
                s.count(stats::RESPONSE_RECEIVED_COUNT.name) as u64 + s.inflight.len() as u64;
            if used >= quota.max_pages {
                if !s.page_limit_reached {
                    s.page_limit_reached = true;
                    s.add(stats::QUOTA_MAX_PAGES_REACHED.name, 1);
                }
                return out;
            }
            max = max.min((quota.max_pages - used) as usize);
        }
        let max_wait = self.max_wait_ms();
        let places: Vec<Place> = s.queue.keys().take(max * 4).copied().collect();
        for place in places {
            if out.len() >= max {
                break;
            }
            let Some(request) = s.queue.get(&place) else {
                continue;
            };
            let host = request.host_key();
            let pages = s.host_pages.get(&host).copied().unwrap_or(0);
            if quota.max_pages_per_host > 0 && pages >= quota.max_pages_per_host {
                s.queue.remove(&place);
                s.add(stats::QUOTA_HOST_DROPPED.name, 1);
                continue;
            }
            let next_free = s.hosts.get(&host).map_or(0, |h| h.next_free);
            if next_free.saturating_sub(now) > max_wait {
                let due = Instant::now() + Duration::from_millis(next_free - now - max_wait);
                s.next_due = Some(s.next_due.map_or(due, |d| d.min(due)));
                continue;
            }
            let Some(request) = s.queue.remove(&place) else {
                continue;
            };
            if quota.max_pages_per_host > 0 {
                *s.host_pages.entry(host.clone()).or_default() += 1;
            }
            let (wait, interval) = self.reserve(s, &host, now, 0);
            let id = place.1.to_string();
            s.inflight.insert(id.clone(), (place, request.clone()));
            out.push(Leased {
                id,
                request: Ok(request),
                wait,
                paced_with: interval,
            });
        }
        s.add(stats::SCHEDULER_DEQUEUED.name, out.len() as i64);
        out
    }

    /// Reserves `host`'s next politeness slot: how long to wait for it, and
    /// the interval applied (as `reserve_slot` in the scripts).
    fn reserve(&self, s: &mut State, host: &str, now: u64, floor: u64) -> (Duration, Duration) {
        let pacing = self.options.pacing;
        let base = pacing.interval.as_millis() as u64;
        let mut interval = base;
        if pacing.jitter && base > 0 {
            s.jitter_salt = s.jitter_salt.wrapping_add(1);
            let r = ((u64::from(std::process::id()) ^ now).wrapping_mul(7919)
                + s.jitter_salt.wrapping_mul(104_729))
                % 1000;
            interval = base * (500 + r) / 1000;
        }
        s.hosts
            .entry(host.to_string())
            .or_default()
            .reserve(now, interval.max(floor))
    }

    /// Reserves another politeness slot for `host`, at least `spacing`
    /// after its last one and no sooner than `hold`, unless more than
    /// `limit` away (see [`super::Frontier::reserve_slot`]).
    pub fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Option<Duration> {
        let mut s = self.state();
        let now = now_ms();
        let next_free = s.hosts.get(host).map_or(0, |h| h.next_free);
        let soonest = Duration::from_millis(next_free.saturating_sub(now)).max(hold);
        if limit.is_some_and(|limit| soonest > limit) {
            return None;
        }
        // Reserved as if asked `hold` from now, as pace.lua does.
        let at = now + hold.as_millis() as u64;
        Some(hold + self.reserve(&mut s, host, at, spacing.as_millis() as u64).0)
    }

    /// Commits one page (see `scripts/commit.lua`) and leases `lease_next`
    /// requests to replace it.
    pub fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
    ) -> (Committed, Vec<Leased>) {
        let mut s = self.state();
        if s.inflight.remove(&leased.id).is_none() {
            return (Committed::LeaseLost, Vec::new());
        }
        let now = now_ms();
        for (field, delta) in page.stats.iter() {
            s.add(&field, delta);
        }
        if let Some(retry) = &page.retry {
            let seq = s.seq();
            let priority = retry.request.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY);
            let due = now + retry.delay.as_millis() as u64;
            s.delayed
                .insert((due, seq), ((-priority, seq), retry.request.clone()));
        }
        if let Some(dead) = &page.dead {
            s.dead.push(dead.clone());
            s.add(stats::DEADLETTER_COUNT.name, 1);
        }
        if let Some(failed) = &page.failed {
            s.failed.push(failed.clone());
            s.add(stats::FAILED_COUNT.name, 1);
        }
        if let Ok(request) = &leased.request {
            let host = request.host_key();
            let backoff_max = self.options.pacing.backoff_max.as_millis() as u64;
            let h = s.hosts.entry(host).or_default();
            if h.news(page.host, now, backoff_max) == HostNews::Slowed {
                s.add(stats::BACKOFF_SLOWED.name, 1);
            }
        }
        match &page.revisit {
            Some(Revisit::At { request, after }) => {
                let due = now + after.as_millis() as u64;
                s.unschedule(&request.fingerprint());
                s.schedule_order.insert((due, request.fingerprint()), ());
                s.schedule
                    .insert(request.fingerprint(), (due, request.clone()));
            }
            Some(Revisit::Drop { request }) if s.unschedule(&request.fingerprint()) => {
                s.add(stats::REVISIT_DROPPED.name, 1);
            }
            Some(Revisit::Drop { .. }) | None => {}
        }
        let (mut enqueued, mut filtered) = (0, 0);
        for request in &page.requests {
            if s.enqueue(request) {
                enqueued += 1;
            } else {
                filtered += 1;
            }
        }
        if enqueued > 0 {
            let depth = page.requests.iter().map(|r| r.depth).max().unwrap_or(0);
            s.max(stats::REQUEST_DEPTH_MAX.name, i64::from(depth));
        }
        s.add(stats::SCHEDULER_ENQUEUED.name, enqueued);
        s.add(stats::DUPEFILTER_FILTERED.name, filtered);
        s.write_items(&page.items);
        let next = self.lease_requests(&mut s, lease_next, now);
        if enqueued > 0 || s.inflight.is_empty() {
            self.wake.notify_waiters();
            self.wake.notify_one();
        }
        (
            Committed::Done {
                enqueued: enqueued as u64,
                filtered: filtered as u64,
            },
            next,
        )
    }

    /// Hands leased requests back to the queue, at their places.
    pub fn release(&self, ids: &[String]) -> u64 {
        let mut s = self.state();
        let mut n = 0;
        for id in ids {
            if let Some((place, request)) = s.inflight.remove(id) {
                // Counted against its host's quota again when leased again.
                if let Some(pages) = s.host_pages.get_mut(&request.host_key()) {
                    *pages = pages.saturating_sub(1);
                }
                s.queue.insert(place, request);
                n += 1;
            }
        }
        n
    }

    /// Claims start entries: each leaves the start list and becomes a
    /// queued request (or a dead letter).
    pub fn claim_start(&self, claims: &[StartClaim]) -> Claimed {
        let mut s = self.state();
        let mut done = Claimed::default();
        for c in claims {
            let Some(at) = s.start.iter().position(|e| *e == c.entry) else {
                continue;
            };
            s.start.remove(at);
            done.claimed += 1;
            match &c.outcome {
                Ok(request) => {
                    if s.enqueue(request) {
                        done.enqueued += 1;
                    } else {
                        done.filtered += 1;
                    }
                }
                Err(Refused { reason, stat }) => {
                    s.dead.push(DeadLetter::new(
                        &self.options.keys.start_urls,
                        &c.entry,
                        reason,
                    ));
                    done.dead += 1;
                    if let Some(stat) = stat {
                        s.add(stat.name, 1);
                    }
                }
            }
        }
        s.add(stats::SCHEDULER_ENQUEUED.name, done.enqueued as i64);
        s.add(stats::DUPEFILTER_FILTERED.name, done.filtered as i64);
        s.add(stats::DEADLETTER_COUNT.name, done.dead as i64);
        s.add(stats::START_URLS_CLAIMED.name, done.claimed as i64);
        if done.enqueued > 0 {
            self.wake.notify_one();
        }
        done
    }

    /// The queue sizes.
    pub fn status(&self) -> QueueStatus {
        let s = self.state();
        let now = now_ms();
        QueueStatus {
            start: s.start.len() as u64,
            queued: s.queue.len() as u64,
            inflight: s.inflight.len() as u64,
            dead: s.dead.len() as u64,
            failed: s.failed.len() as u64,
            dupefilter: s.seen.len() as u64,
            items: s.items,
            delayed: s.delayed.len() as u64,
            scheduled: s.schedule.len() as u64,
            overdue: s.schedule_order.range(..(now, String::new())).count() as u64,
            paused: false,
            page_limit_reached: s.page_limit_reached,
            items_backlog_full: false,
        }
    }

    /// Adds stats increments; sets `start_time` once.
    pub fn add_stats(&self, tally: &Tally, start_time: Option<&str>) {
        let mut s = self.state();
        for (field, delta) in tally.iter() {
            s.add(&field, delta);
        }
        if let Some(t) = start_time {
            s.stats
                .entry(stats::START_TIME.name.to_string())
                .or_insert_with(|| StatValue::Text(t.to_string()));
        }
    }

    /// Records the finish as Scrapy does (see the Redis frontier's).
    pub fn record_finish(&self, reason: &str) {
        let mut s = self.state();
        let now = std::time::SystemTime::now();
        let elapsed = match s.stats.get(stats::START_TIME.name) {
            Some(StatValue::Text(t)) => humantime::parse_rfc3339(t)
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default(),
            _ => Duration::ZERO,
        };
        let finish = humantime::format_rfc3339_seconds(now).to_string();
        for (field, value) in [
            (stats::FINISH_TIME.name, finish),
            (stats::FINISH_REASON.name, reason.to_string()),
            (
                stats::ELAPSED_TIME_SECONDS.name,
                format!("{:.3}", elapsed.as_secs_f64()),
            ),
        ] {
            s.stats.insert(field.to_string(), StatValue::Text(value));
        }
        if let Some(sink) = s.sink.as_mut() {
            let _ = sink.flush();
        }
    }

    pub fn stat(&self, name: &str) -> u64 {
        self.state().count(name).max(0) as u64
    }

    pub fn stats(&self) -> Vec<(String, String)> {
        self.state()
            .stats
            .iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect()
    }

    /// How many hosts adaptive back-off slows right now.
    pub fn hosts_backed_off(&self) -> u64 {
        self.state()
            .hosts
            .values()
            .filter(|h| h.backoff > 0)
            .count() as u64
    }

    pub fn robots_cached(&self, host: &str) -> Option<RobotsRecord> {
        self.state().robots.get(host).cloned()
    }

    pub fn robots_store(&self, host: &str, record: &RobotsRecord, crawl_delay: Duration) {
        let mut s = self.state();
        s.robots.insert(host.to_string(), record.clone());
        s.hosts.entry(host.to_string()).or_default().crawl_delay = crawl_delay.as_millis() as u64;
    }

    /// The failures and dead letters, for the end-of-crawl summary.
    pub fn failures(&self) -> (Vec<FailedRecord>, Vec<DeadLetter>) {
        let s = self.state();
        (s.failed.clone(), s.dead.clone())
    }

    /// Why the item sink failed, if it did.
    pub fn sink_error(&self) -> Option<String> {
        self.state().sink_error.clone()
    }
}

impl State {
    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    fn count(&self, name: &str) -> i64 {
        match self.stats.get(name) {
            Some(StatValue::Count(n)) => *n,
            _ => 0,
        }
    }

    fn add(&mut self, name: &str, n: i64) {
        if n == 0 {
            return;
        }
        let entry = self
            .stats
            .entry(name.to_string())
            .or_insert(StatValue::Count(0));
        if let StatValue::Count(v) = entry {
            *v += n;
        }
    }

    fn max(&mut self, name: &str, n: i64) {
        if self.count(name) < n {
            self.stats.insert(name.to_string(), StatValue::Count(n));
        }
    }

    /// Queues `request` unless the dupefilter has seen it; true if queued.
    fn enqueue(&mut self, request: &Request) -> bool {
        if !request.dont_filter && !self.seen.insert(request.fingerprint()) {
            return false;
        }
        let seq = self.seq();
        let priority = request.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY);
        self.queue.insert((-priority, seq), request.clone());
        true
    }

    /// Puts retries and revisits whose time has come in the queue.
    fn release_due(&mut self, now: u64) {
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (place, request) = entry.remove();
            self.queue.insert(place, request);
        }
        while let Some(entry) = self.schedule_order.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((_, fp), ()) = entry.remove_entry();
            if let Some((_, request)) = self.schedule.remove(&fp) {
                let seq = self.seq();
                let priority = request.priority.clamp(-MAX_PRIORITY, MAX_PRIORITY);
                self.queue.insert((-priority, seq), request);
                self.add(stats::REVISIT_QUEUED.name, 1);
            }
        }
    }

    /// Takes a page off the revisit schedule; true if it was on it.
    fn unschedule(&mut self, fingerprint: &str) -> bool {
        match self.schedule.remove(fingerprint) {
            Some((due, _)) => {
                self.schedule_order.remove(&(due, fingerprint.to_string()));
                true
            }
            None => false,
        }
    }

    fn write_items(&mut self, items: &[serde_json::Map<String, serde_json::Value>]) {
        if items.is_empty() || self.sink_error.is_some() {
            return;
        }
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        let mut written = 0;
        let mut failed = None;
        for item in items {
            let line = super::to_json(item);
            if let Err(e) = writeln!(sink, "{line}") {
                failed = Some(e.to_string());
                break;
            }
            written += 1;
        }
        if failed.is_none() {
            if let Err(e) = sink.flush() {
                failed = Some(e.to_string());
            }
        }
        self.items += written;
        if let Some(e) = failed {
            self.sink_error = Some(e);
        }
    }
}
