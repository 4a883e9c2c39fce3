//! The local frontier: a whole crawl in one process, held in memory, for
//! `crawlworker run --local`. It keeps the frontier contract step for step
//! (see [`super::contract`], where its few differences on purpose are
//! listed), so a spider crawled locally finds what a cluster finds. The
//! contract suite runs every promise against it and against Redis.
//!
//! [`state`] holds the crawl and its steps, each the counterpart of a
//! Redis script; [`sink`] writes the items as JSON Lines. A
//! [`LocalFrontier`] is one worker's handle on a crawl: the run holds one,
//! and [`LocalFrontier::handle`] gives another worker's (leases belong to
//! the worker that took them, as in Redis).

mod sink;
mod state;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Notify;

pub use sink::{ItemWriter, WholeLines};

use super::error::Result;
use super::outage::Fatal;
use super::patience::Patience;
use super::pickup::StartWatch;
use super::politeness::HostState;
use super::wake::Wake;
use super::{
    Backend, Claimed, Committed, DeadLetter, DueOnly, FailedRecord, HandBack, Handoff, Heartbeat,
    Keys, Leased, Options, PageResult, QueueStatus, RobotsRecord, SessionLock, SessionLogin,
    SessionRecord, StartClaim, Swept,
};
use crate::request::Request;
use crate::stats::{self, Stat, Tally};
use state::{now_ms, StatValue, State};

/// One worker's handle on a local crawl.
#[derive(Clone)]
pub struct LocalFrontier {
    options: Options,
    crawl: Arc<Crawl>,
    /// Whether its leases take only requests due now (see
    /// [`Backend::lease_due_only`]).
    due_only: DueOnly,
    /// This worker's: raised by its commits (see [`Backend::hand_back`]).
    hand_back: HandBack,
}

/// The crawl the handles share.
struct Crawl {
    state: Mutex<State>,
    /// Woken when work is queued, or the crawl may have drained.
    wake: Arc<Notify>,
    /// Woken when the crawl is paused or resumed.
    control: Arc<Notify>,
    /// Each worker's hand-back signal, for a worker joining the crew to
    /// raise when it finds that one over twice its new share (the
    /// crew-grew message of the Redis frontier, see
    /// [`super::fairness::CrewGrew`]).
    hand_backs: Mutex<HashMap<String, HandBack>>,
    /// What stops the crawl for good (a refused login with no account
    /// left): no Redis error ever raises it here.
    fatal: Fatal,
}

impl LocalFrontier {
    /// A local crawl of the spider `options` describes, starting from
    /// `start` entries, its items written to `sink`.
    pub fn new(options: Options, start: Vec<String>, sink: ItemWriter) -> LocalFrontier {
        let state = State::new(start, sink::Sink::new(sink));
        let crawl = Arc::new(Crawl {
            state: Mutex::new(state),
            wake: Arc::default(),
            control: Arc::default(),
            hand_backs: Mutex::default(),
            fatal: Fatal::default(),
        });
        LocalFrontier::of(crawl, options)
    }

    /// A worker's handle on `crawl`, its hand-back signal known to its
    /// peers.
    fn of(crawl: Arc<Crawl>, options: Options) -> LocalFrontier {
        let hand_back = HandBack::default();
        if let Ok(mut all) = crawl.hand_backs.lock() {
            all.insert(options.worker.clone(), hand_back.clone());
        }
        LocalFrontier {
            options,
            crawl,
            due_only: DueOnly::default(),
            hand_back,
        }
    }

    /// Why a spider that hands links to other spiders cannot crawl locally:
    /// there is no other spider's start key to push them to.
    pub fn refuse_handoffs(spider: &str, handoffs: &[Handoff]) -> std::result::Result<(), String> {
        match handoffs.first() {
            Some(h) => Err(format!(
                "spider `{spider}` hands links to spider `{}` (to_spider), which a local crawl cannot reach: run it on a Redis cluster, or remove to_spider",
                h.spider
            )),
            None => Ok(()),
        }
    }

    /// Another worker's handle on the same crawl, with its own `options`
    /// (its worker id, lease, quotas).
    pub fn handle(&self, options: Options) -> LocalFrontier {
        LocalFrontier::of(Arc::clone(&self.crawl), options)
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves consistent data (each step
        // is done whole before anything else reads it).
        self.crawl.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn notify(&self) {
        self.crawl.wake.notify_one();
    }

    /// Tells every handle's run that the pause changed.
    fn control_changed(&self) {
        self.crawl.control.notify_waiters();
        self.crawl.control.notify_one();
    }

    /// Queues the spider's sitemaps and feeds (`[start] sitemap`, `feed`),
    /// each once.
    pub fn seed(&self, seeds: &[Request]) -> u64 {
        self.state().seed(seeds) as u64
    }

    pub fn options(&self) -> &Options {
        &self.options
    }

    /// The items written so far.
    pub fn items_written(&self) -> u64 {
        self.state().sink.written
    }

    /// Why the item sink failed, if it did.
    pub fn sink_error(&self) -> Option<String> {
        self.state().sink.error.clone()
    }

    /// `host`'s politeness numbers (its next slot, Crawl-delay, back-off
    /// and error share), if the crawl keeps any: what the Redis frontier
    /// keeps in its per-host hashes, for the contract suite to compare.
    pub fn host_state(&self, host: &str) -> Option<HostState> {
        self.state().hosts.get(host).copied()
    }

    /// How far ahead its leases may reserve a host's slot (ms).
    fn reach(&self) -> u64 {
        self.due_only.reach(self.options.lease).as_millis() as u64
    }

    fn lease_now(&self, max: usize, peek: usize) -> (Vec<Leased>, Vec<String>) {
        let mut s = self.state();
        let now = now_ms();
        let reach = self.reach();
        s.release_due(&self.options, now, reach);
        let joins = !s.in_crew(&self.options.worker, now);
        s.join_crew(&self.options.worker, now, self.options.lease);
        let out = s.lease_requests(&self.options, max, now, reach);
        if joins && out.len() < max {
            self.crew_grew(&s.over_share_besides(&self.options.worker));
        }
        let start = if out.len() < max || max == 0 {
            s.start.iter().take(peek).cloned().collect()
        } else {
            Vec::new()
        };
        (out, start)
    }

    /// This worker joined the crew with less than it asked for: the
    /// `over` workers, holding over twice their new share, hand back what
    /// they cannot start (`announce_joined` in the scripts).
    fn crew_grew(&self, over: &[String]) {
        let Ok(all) = self.crawl.hand_backs.lock() else {
            return;
        };
        for worker in over {
            if let Some(hand_back) = all.get(worker) {
                hand_back.ask();
            }
        }
    }

    fn commit_now(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
    ) -> (Committed, Vec<Leased>) {
        let mut s = self.state();
        let Some(lease) = s.end_lease(&leased.id, &self.options.worker) else {
            return (Committed::LeaseLost, Vec::new());
        };
        let now = now_ms();
        let (enqueued, filtered) = s.commit_page(&self.options, lease, page, now);
        let reach = self.reach();
        s.release_due(&self.options, now, reach);
        let next = s.lease_requests(&self.options, lease_next, now, reach);
        if s.over_share() {
            self.hand_back.ask();
        }
        if enqueued > 0 || s.inflight() == 0 {
            self.crawl.wake.notify_waiters();
            self.notify();
        }
        (Committed::Done { enqueued, filtered }, next)
    }

    fn status_now(&self) -> QueueStatus {
        let s = self.state();
        let (scheduled, overdue) = s.scheduled(now_ms());
        QueueStatus {
            start: s.start.len() as u64,
            queued: s.queued() as u64,
            // One process, one frontier: nothing is on its way elsewhere.
            outboxed: 0,
            inflight: s.inflight() as u64,
            dead: s.dead.len() as u64,
            failed: s.failed.len() as u64,
            dupefilter: s.dupefilter() as u64,
            items: s.sink.written,
            delayed: s.delayed() as u64,
            scheduled: scheduled as u64,
            overdue: overdue as u64,
            paused: s.paused,
            page_limit_reached: s.page_limit_reached,
            items_backlog_full: false,
            // A local crawl refuses hand-offs: nothing feeds it.
            upstreams: Vec::new(),
        }
    }

    fn reserve_slot_now(
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
        let spacing = spacing.as_millis() as u64;
        Some(hold + s.reserve(&self.options, host, at, spacing).0)
    }

    fn robots_lock_now(&self, host: &str, ttl: Duration) -> bool {
        let mut s = self.state();
        let now = now_ms();
        if s.robots_locks.get(host).is_some_and(|until| *until > now) {
            return false;
        }
        let until = now + ttl.as_millis().max(1) as u64;
        s.robots_locks.insert(host.to_string(), until);
        true
    }

    fn add_stats_now(&self, tally: &Tally, start_time: Option<&str>) {
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

    fn record_finish_now(&self, reason: &str) {
        let mut s = self.state();
        let now = std::time::SystemTime::now();
        let elapsed = match s.stats.get(stats::START_TIME.name) {
            Some(StatValue::Text(t)) => humantime::parse_rfc3339(t)
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .unwrap_or_default(),
            _ => Duration::ZERO,
        };
        let finish = humantime::format_rfc3339_millis(now).to_string();
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
        s.sink.flush();
    }
}

/// The last `n` of `records`, oldest first.
fn last<T: Clone>(records: &[T], n: usize) -> Vec<T> {
    records[records.len().saturating_sub(n.max(1))..].to_vec()
}

#[async_trait]
impl Backend for LocalFrontier {
    fn keys(&self) -> &Keys {
        &self.options.keys
    }

    fn worker(&self) -> &str {
        &self.options.worker
    }

    fn hand_back(&self) -> HandBack {
        self.hand_back.clone()
    }

    fn items_key(&self) -> &str {
        &self.options.keys.items
    }

    fn is_shared(&self) -> bool {
        false
    }

    fn fatal(&self) -> Fatal {
        self.crawl.fatal.clone()
    }

    fn wake(&self) -> Wake {
        Wake::local(
            Arc::clone(&self.crawl.wake),
            Arc::clone(&self.crawl.control),
        )
    }

    async fn watch_start(&self, _recheck: Duration) -> StartWatch {
        // Entries come only through this process, which announces them.
        StartWatch::none()
    }

    async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        Ok(self.lease_now(max, peek))
    }

    fn lease_due_only(&self, due_only: bool) {
        self.due_only.set(due_only);
    }

    fn next_due_in(&self) -> Option<Duration> {
        self.state().next_due(now_ms())
    }

    async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        _patience: Patience,
    ) -> Result<(Committed, Vec<Leased>)> {
        Ok(self.commit_now(leased, page, lease_next))
    }

    async fn renew(&self, ids: &[String]) -> Result<Vec<String>> {
        let deadline = now_ms() + self.options.lease.as_millis() as u64;
        Ok(self.state().renew(&self.options.worker, ids, deadline))
    }

    async fn release(&self, ids: &[String]) -> Result<u64> {
        let n = self.state().release(&self.options.worker, ids);
        if n > 0 {
            self.notify();
        }
        Ok(n)
    }

    async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed> {
        let done = self.state().claim(&self.options.keys.start_urls, claims);
        if done.enqueued > 0 {
            self.notify();
        }
        Ok(done)
    }

    async fn status(&self) -> Result<QueueStatus> {
        Ok(self.status_now())
    }

    async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>> {
        Ok(self.reserve_slot_now(host, spacing, hold, limit))
    }

    async fn hosts_backed_off(&self) -> Result<u64> {
        Ok(self
            .state()
            .hosts
            .values()
            .filter(|h| h.backoff > 0)
            .count() as u64)
    }

    async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>> {
        Ok(self.state().robots.get(host).cloned())
    }

    async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        _ttl: Duration,
    ) -> Result<()> {
        let mut s = self.state();
        s.robots.insert(host.to_string(), record.clone());
        s.robots_locks.remove(host);
        s.hosts.entry(host.to_string()).or_default().crawl_delay = crawl_delay.as_millis() as u64;
        Ok(())
    }

    async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool> {
        Ok(self.robots_lock_now(host, ttl))
    }

    async fn session(&self) -> Result<SessionRecord> {
        Ok(self.state().session.clone())
    }

    async fn session_lock(&self, seen: u64, holder: &str, ttl: Duration) -> Result<SessionLock> {
        let mut s = self.state();
        if s.session.fresh_after(seen) {
            return Ok(SessionLock::Fresh(s.session.clone()));
        }
        let now = now_ms();
        if s.session_lock
            .as_ref()
            .is_some_and(|(_, until)| *until > now)
        {
            return Ok(SessionLock::Busy);
        }
        s.session_lock = Some((holder.to_string(), now + ttl.as_millis().max(1) as u64));
        Ok(SessionLock::Taken)
    }

    async fn session_store(&self, holder: &str, login: &SessionLogin) -> Result<bool> {
        let mut s = self.state();
        let now = now_ms();
        let held = s
            .session_lock
            .as_ref()
            .is_some_and(|(h, until)| h == holder && *until > now);
        let late = !held
            && !login.keep_lock
            && login.cookie.is_some()
            && s.session.generation == login.seen;
        if !held && !late {
            return Ok(false);
        }
        if held {
            s.session.accounts = login.accounts.clone();
            if login.keep_lock {
                return Ok(true);
            }
            s.session_lock = None;
        }
        let session = &mut s.session;
        if let Some(cookie) = &login.cookie {
            session.generation += 1;
            session.logins += 1;
            session.cookie = cookie.clone();
            session.account = login.account.clone();
            session.created_ms = now;
            session.stale = false;
        }
        Ok(true)
    }

    async fn session_stale(&self, generation: u64) -> Result<bool> {
        let mut s = self.state();
        if s.session.generation != generation || s.session.stale {
            return Ok(false);
        }
        s.session.stale = true;
        Ok(true)
    }

    async fn sweep(&self, _budget: usize, _robots_ttl: Duration) -> Result<Swept> {
        // A local crawl's per-host state ends with the crawl.
        Ok(Swept::default())
    }

    async fn grow_dupefilter(&self) -> Result<()> {
        // A local crawl's dupefilter is an exact set, grown as it fills.
        Ok(())
    }

    async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()> {
        self.add_stats_now(tally, start_time);
        Ok(())
    }

    async fn record_finish(&self, reason: &str) -> Result<()> {
        self.record_finish_now(reason);
        Ok(())
    }

    async fn stat(&self, stat: Stat) -> Result<u64> {
        Ok(self.state().count(stat.name).max(0) as u64)
    }

    async fn stats(&self) -> Result<Vec<(String, String)>> {
        let s = self.state();
        // The queue is in memory: Scrapy's name for it, not Redis's.
        let name = |k: &str| match k.strip_suffix("/redis") {
            Some(base) => format!("{base}/memory"),
            None => k.to_string(),
        };
        Ok(s.stats
            .iter()
            .map(|(k, v)| (name(k), v.to_string()))
            .collect())
    }

    async fn failures(&self, n: usize) -> Result<Vec<FailedRecord>> {
        Ok(last(&self.state().failed, n))
    }

    async fn dead_letters(&self, n: usize) -> Result<Vec<DeadLetter>> {
        Ok(last(&self.state().dead, n))
    }

    async fn push_start(&self, entries: &[String]) -> Result<u64> {
        self.state().start.extend(entries.iter().cloned());
        self.notify();
        Ok(entries.len() as u64)
    }

    async fn pause(&self) -> Result<bool> {
        let was = std::mem::replace(&mut self.state().paused, true);
        self.control_changed();
        Ok(!was)
    }

    async fn resume(&self) -> Result<bool> {
        let was = std::mem::replace(&mut self.state().paused, false);
        self.control_changed();
        self.notify();
        Ok(was)
    }

    async fn paused(&self) -> Result<bool> {
        Ok(self.state().paused)
    }

    async fn heartbeat(&self, _beat: &Heartbeat) -> Result<()> {
        // No other worker reads it.
        Ok(())
    }

    async fn unregister(&self) -> Result<()> {
        self.state().leave(&self.options.worker);
        if let Ok(mut all) = self.crawl.hand_backs.lock() {
            all.remove(&self.options.worker);
        }
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<(String, Heartbeat)>> {
        Ok(Vec::new())
    }
}
