//! A local crawl's state and the steps that change it, each the
//! counterpart of a Redis script (named beside each step): the queue
//! (priority, then first in, first out), the leases with their owners and
//! deadlines, the dupefilter (exact), retries and revisits waiting for
//! their time, per-host politeness ([`HostState`], the one rule both
//! backends follow), quotas, the pause, and the stats. Every step runs
//! under the crawl's one lock, so each is atomic as a script is.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::super::fairness::{self, SlotShare};
use super::super::parking;
use super::super::politeness::{jittered, HostNews, HostState};
use super::super::{
    Claimed, DeadLetter, FailedRecord, Leased, Options, PageResult, Refused, Revisit, RobotsRecord,
    StartClaim, MAX_PRIORITY,
};
use super::sink::Sink;
use crate::request::Request;
use crate::stats::{self, Stat};

/// A queue position: higher priority first, then first in, first out (the
/// order of the scripts' `queue_score`).
pub(super) type Place = (i64, u64);

/// A leased request: where it goes back to, who holds it, until when.
pub(super) struct Lease {
    place: Place,
    request: Request,
    worker: String,
    /// Milliseconds since the epoch.
    deadline: u64,
}

/// A stats field: a counter, or a text such as `start_time`.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum StatValue {
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

/// One local crawl.
#[derive(Default)]
pub(super) struct State {
    pub start: VecDeque<String>,
    queue: BTreeMap<Place, Request>,
    /// Leased requests by id.
    leases: HashMap<String, Lease>,
    /// Request (its queue place's number, its lease id) → how many times
    /// its lease expired; forgotten when it is committed or set aside
    /// (`lease_expiries` in the scripts).
    lease_expiries: HashMap<u64, u32>,
    /// Worker → until when (ms) it counts as crawling: the crew the fair
    /// share of leases divides among (`crew` in the scripts).
    crew: HashMap<String, u64>,
    seen: HashSet<String>,
    next_seq: u64,
    /// Retries waiting for their time: (due ms, seq) → place and request.
    delayed: BTreeMap<(u64, u64), (Place, Request)>,
    /// Parked requests, per host in queue order (`parked` in the scripts;
    /// see [`parking`]): queued, but out of the queue's way.
    parked: HashMap<String, BTreeMap<Place, Request>>,
    /// Host with parked requests → its next turn (ms; `parked_hosts`).
    parked_turns: HashMap<String, u64>,
    /// Revisits: fingerprint → (due ms, request), and the due order.
    schedule: HashMap<String, (u64, Request)>,
    schedule_order: BTreeMap<(u64, String), ()>,
    /// Revisits queued and not yet fetched (overdue): fingerprint → due.
    schedule_due: HashMap<String, u64>,
    /// Seed URLs queued once per crawl.
    seeds: HashSet<String>,
    pub hosts: HashMap<String, HostState>,
    /// Pages leased per host (for `max_pages_per_host`).
    host_pages: HashMap<String, u64>,
    pub robots: HashMap<String, RobotsRecord>,
    /// Host → until when (ms) its robots.txt fetch is taken.
    pub robots_locks: HashMap<String, u64>,
    /// The login session, and who holds the login lock until when (ms).
    pub session: crate::frontier::SessionRecord,
    pub session_lock: Option<(String, u64)>,
    pub stats: BTreeMap<String, StatValue>,
    pub dead: Vec<DeadLetter>,
    pub failed: Vec<FailedRecord>,
    pub paused: bool,
    pub page_limit_reached: bool,
    /// Whether the last lease found its worker over twice its fair share
    /// (`over_share` in the scripts; see [`State::over_share`]).
    over_share: bool,
    pub sink: Sink,
    /// Makes each jittered slot's salt differ.
    jitter_salt: u64,
}

/// Milliseconds since the epoch: the clock of a local crawl's deadlines.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn clamped(priority: i64) -> i64 {
    priority.clamp(-MAX_PRIORITY, MAX_PRIORITY)
}

impl State {
    pub fn new(start: Vec<String>, sink: Sink) -> State {
        State {
            start: start.into(),
            sink,
            ..State::default()
        }
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    pub fn count(&self, name: &str) -> i64 {
        match self.stats.get(name) {
            Some(StatValue::Count(n)) => *n,
            _ => 0,
        }
    }

    pub fn add(&mut self, name: &str, n: i64) {
        if n == 0 {
            return;
        }
        let entry = self
            .stats
            .entry(name.to_string())
            .or_insert(StatValue::Count(0));
        match entry {
            StatValue::Count(v) => *v += n,
            // A counter holding text counts from 0, as in the scripts.
            text => *text = StatValue::Count(n),
        }
    }

    fn count_stat(&mut self, stat: Stat, n: usize) {
        self.add(stat.name, n as i64);
    }

    fn max(&mut self, name: &str, n: i64) {
        if self.count(name) < n {
            self.stats.insert(name.to_string(), StatValue::Count(n));
        }
    }

    pub fn inflight(&self) -> usize {
        self.leases.len()
    }

    pub fn queued(&self) -> usize {
        self.queue.len() + self.parked.values().map(BTreeMap::len).sum::<usize>()
    }

    pub fn delayed(&self) -> usize {
        self.delayed.len()
    }

    pub fn dupefilter(&self) -> usize {
        self.seen.len()
    }

    /// Revisits waiting and queued, and those of them overdue at `now`
    /// (as `status.lua` counts them: due at `now` or before).
    pub fn scheduled(&self, now: u64) -> (usize, usize) {
        let waiting_overdue = self
            .schedule_order
            .range(..(now.saturating_add(1), String::new()))
            .count();
        let queued = self.schedule_due.len();
        (self.schedule.len() + queued, waiting_overdue + queued)
    }

    /// Queues `request` unless the dupefilter has seen it (`enqueue` in the
    /// scripts); true if queued.
    pub fn enqueue(&mut self, request: &Request) -> bool {
        if !request.dont_filter && !self.seen.insert(request.fingerprint()) {
            return false;
        }
        let seq = self.seq();
        self.queue
            .insert((-clamped(request.priority), seq), request.clone());
        true
    }

    /// Queues the spider's seeds once per crawl, past the dupefilter
    /// (`seed.lua`); returns how many were queued.
    pub fn seed(&mut self, seeds: &[Request]) -> usize {
        let mut queued = 0;
        for seed in seeds {
            if self.seeds.insert(seed.url.clone()) {
                let seq = self.seq();
                self.queue.insert((0, seq), seed.clone());
                queued += 1;
            }
        }
        self.count_stat(stats::SCHEDULER_ENQUEUED, queued);
        queued
    }

    /// Puts work that came due back in the queue: expired leases, retries
    /// and revisits (`requeue_expired`, `requeue_due` and
    /// `release_revisits` in the scripts).
    /// `max_wait`: how far ahead a lease may reserve a host's slot (ms).
    pub fn release_due(&mut self, options: &Options, now: u64, max_wait: u64) {
        let expired: Vec<String> = self
            .leases
            .iter()
            .filter(|(_, l)| l.deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        let mut dead = 0;
        for id in &expired {
            if let Some(lease) = self.leases.remove(id) {
                dead += usize::from(self.requeue_expired(options, lease));
            }
        }
        self.count_stat(stats::LEASE_EXPIRED, expired.len());
        self.count_stat(stats::LEASE_EXPIRED_DEAD, dead);
        self.count_stat(stats::DEADLETTER_COUNT, dead);
        self.release_parked(options, now, max_wait);
        while let Some(entry) = self.delayed.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let (place, request) = entry.remove();
            self.queue.insert(place, request);
        }
        let mut queued = 0;
        while let Some(entry) = self.schedule_order.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let ((due, fp), ()) = entry.remove_entry();
            if let Some((_, request)) = self.schedule.remove(&fp) {
                let seq = self.seq();
                self.queue
                    .insert((-clamped(request.priority), seq), request);
                self.schedule_due.insert(fp, due);
                queued += 1;
            }
        }
        self.count_stat(stats::REVISIT_QUEUED, queued);
    }

    /// An expired lease's request back to its queue place, its expiries
    /// counted; at `max_lease_expiries` (0: no limit) a dead letter
    /// instead (`requeue_expired` in the scripts). Whether it was set
    /// aside.
    fn requeue_expired(&mut self, options: &Options, lease: Lease) -> bool {
        let n = self.lease_expiries.entry(lease.place.1).or_default();
        *n += 1;
        let (n, max) = (*n, options.max_lease_expiries);
        if max == 0 || n < max {
            self.queue.insert(lease.place, lease.request);
            return false;
        }
        self.lease_expiries.remove(&lease.place.1);
        let json = serde_json::to_string(&lease.request).unwrap_or_default();
        let reason = crate::frontier::records::lease_expiries_reason(n, max);
        self.dead
            .push(DeadLetter::new(&options.keys.requests, &json, &reason));
        true
    }

    /// Leases up to `max` requests to `options.worker` at `now`
    /// (`lease_requests` in the scripts).
    pub fn lease_requests(
        &mut self,
        options: &Options,
        max: usize,
        now: u64,
        max_wait: u64,
    ) -> Vec<Leased> {
        self.over_share = false;
        if max == 0 || self.paused || self.sink.failed() {
            return Vec::new();
        }
        let max = max.min(self.fair_room(&options.worker, now, options.lease));
        if max == 0 {
            return Vec::new();
        }
        let crew = self.crew.len();
        let mut ahead: HashMap<String, u64> = HashMap::new();
        let Some(max) = self.within_page_limit(options.quota.max_pages, max) else {
            return Vec::new();
        };
        // Four times what it asks for, and up to PARK_SCAN deeper for the
        // entries it parks (`lease_requests` in the scripts).
        let (mut depth, reach) = (max * 4, max * 4 + parking::PARK_SCAN);
        let places: Vec<Place> = self.queue.keys().take(reach).copied().collect();
        let mut out = Vec::new();
        for (scanned, place) in places.into_iter().enumerate() {
            if out.len() >= max || scanned >= depth {
                break;
            }
            let Some(host) = self.queue.get(&place).map(Request::host_key) else {
                continue;
            };
            let per_host = options.quota.max_pages_per_host;
            let pages = self.host_pages.get(&host).copied().unwrap_or(0);
            if per_host > 0 && pages >= per_host {
                self.queue.remove(&place);
                self.lease_expiries.remove(&place.1);
                self.count_stat(stats::QUOTA_HOST_DROPPED, 1);
                continue;
            }
            let next_free = self.hosts.get(&host).map_or(0, |h| h.next_free);
            let taken = ahead.get(&host).copied().unwrap_or(0);
            let share = if next_free.saturating_sub(now) > max_wait {
                SlotShare::ParkUntil(next_free - max_wait)
            } else {
                self.crew_share(options, &host, now, crew, taken)
            };
            match share {
                SlotShare::Lease => {}
                SlotShare::Left => continue,
                SlotShare::ParkUntil(reach_at) => {
                    self.park(place, &host, reach_at);
                    depth = (depth + 1).min(reach);
                    continue;
                }
            }
            *ahead.entry(host.clone()).or_default() += 1;
            let Some(request) = self.queue.remove(&place) else {
                continue;
            };
            if per_host > 0 {
                *self.host_pages.entry(host.clone()).or_default() += 1;
            }
            let (wait, interval) = self.reserve(options, &host, now, 0);
            let id = place.1.to_string();
            let lease = Lease {
                place,
                request: request.clone(),
                worker: options.worker.clone(),
                deadline: now + options.lease.as_millis() as u64,
            };
            self.leases.insert(id.clone(), lease);
            out.push(Leased {
                id,
                request: Ok(request),
                wait,
                paced_with: interval,
            });
        }
        self.count_stat(stats::SCHEDULER_DEQUEUED, out.len());
        out
    }

    /// How many more `worker` may lease: its fair share of what the crawl
    /// has out, less what it holds (`fair_room` in the scripts); renews
    /// its place in the crew, and forgets the workers gone for a lease.
    fn fair_room(&mut self, worker: &str, now: u64, lease: Duration) -> usize {
        self.join_crew(worker, now, lease);
        let held = self.leases.values().filter(|l| l.worker == worker).count();
        let out = self.queued() + self.leases.len();
        self.over_share = fairness::over_share(out, self.crew.len(), held);
        fairness::fair_room(out, self.crew.len(), held)
    }

    /// Whether the last lease found its worker holding over twice its
    /// fair share: a commit asks it to hand back what it cannot start.
    pub fn over_share(&self) -> bool {
        self.over_share
    }

    /// The spacing of `host`'s slots (ms): the spider's delay, its
    /// Crawl-delay or its back-off, whichever is longest.
    fn spacing(&self, options: &Options, host: &str) -> u64 {
        let state = self.hosts.get(host).copied().unwrap_or_default();
        (options.pacing.interval.as_millis() as u64)
            .max(state.crawl_delay)
            .max(state.backoff)
    }

    /// What a lease does with a request for `host` given the crew's share
    /// of its slots (`beyond_share` in the scripts), `taken` of them
    /// leased in this step already.
    fn crew_share(
        &self,
        options: &Options,
        host: &str,
        now: u64,
        crew: usize,
        taken: u64,
    ) -> SlotShare {
        let next_free = self.hosts.get(host).map_or(0, |h| h.next_free);
        fairness::beyond_share(self.spacing(options, host), next_free, now, crew, taken)
    }

    /// Parks the request at `place`, whose host's slot comes within reach
    /// at `reach_at` (ms): out of the queue's way, in its host's queue,
    /// until the host's turn (`PARKING.park` in the scripts; see
    /// [`parking`]).
    fn park(&mut self, place: Place, host: &str, reach_at: u64) {
        let Some(request) = self.queue.remove(&place) else {
            return;
        };
        self.parked
            .entry(host.to_string())
            .or_default()
            .insert(place, request);
        let turn = self
            .parked_turns
            .entry(host.to_string())
            .or_insert(reach_at);
        *turn = (*turn).min(reach_at);
        self.count_stat(stats::SCHEDULER_PARKED, 1);
    }

    /// Puts back at their queue places the parked requests of the hosts
    /// whose turn has come: as many as each host's slots within reach
    /// (`PARKING.release` in the scripts).
    fn release_parked(&mut self, options: &Options, now: u64, max_wait: u64) {
        let due: Vec<String> = self
            .parked_turns
            .iter()
            .filter(|(_, turn)| **turn <= now)
            .map(|(host, _)| host.clone())
            .collect();
        for host in due {
            let spacing = self.spacing(options, &host).max(1);
            let ahead = self
                .hosts
                .get(&host)
                .map_or(0, |h| h.next_free.saturating_sub(now));
            let n = parking::returning(max_wait, ahead, spacing);
            let Some(parked) = self.parked.get_mut(&host) else {
                self.parked_turns.remove(&host);
                continue;
            };
            for _ in 0..n {
                let Some((place, request)) = parked.pop_first() else {
                    break;
                };
                self.queue.insert(place, request);
            }
            if parked.is_empty() {
                self.parked.remove(&host);
                self.parked_turns.remove(&host);
            } else {
                self.parked_turns
                    .insert(host, parking::next_look(now, n, spacing));
            }
        }
    }

    /// Renews `worker`'s place in the crew for a lease, and forgets the
    /// workers gone for as long (`crew_renew` in the scripts).
    pub fn join_crew(&mut self, worker: &str, now: u64, lease: Duration) {
        self.crew.retain(|_, until| *until > now);
        self.crew
            .insert(worker.to_string(), now + lease.as_millis() as u64);
    }

    /// Whether `worker` is in the crew now (it leased or committed within
    /// a lease).
    pub fn in_crew(&self, worker: &str, now: u64) -> bool {
        self.crew.get(worker).is_some_and(|until| *until > now)
    }

    /// The crew's workers, other than `worker`, holding over twice their
    /// fair share now (see [`fairness::CrewGrew`]).
    pub fn over_share_besides(&self, worker: &str) -> Vec<String> {
        let out = self.queued() + self.leases.len();
        let mut held: HashMap<&str, usize> = HashMap::new();
        for lease in self.leases.values() {
            *held.entry(lease.worker.as_str()).or_default() += 1;
        }
        held.into_iter()
            .filter(|(w, n)| *w != worker && fairness::over_share(out, self.crew.len(), *n))
            .map(|(w, _)| w.to_string())
            .collect()
    }

    /// `worker` stopped: its peers' shares grow at once.
    pub fn leave(&mut self, worker: &str) {
        self.crew.remove(worker);
    }

    /// How many may be leased under `max_pages` (responses received plus
    /// requests in flight), or `None` once it is reached; a limit raised
    /// since it was reached lets leasing go on.
    fn within_page_limit(&mut self, max_pages: u64, max: usize) -> Option<usize> {
        if max_pages == 0 {
            return Some(max);
        }
        let used = self.count(stats::RESPONSE_RECEIVED_COUNT.name).max(0) as u64
            + self.leases.len() as u64;
        if used >= max_pages {
            if !self.page_limit_reached {
                self.page_limit_reached = true;
                self.count_stat(stats::QUOTA_MAX_PAGES_REACHED, 1);
            }
            return None;
        }
        self.page_limit_reached = false;
        Some(max.min((max_pages - used) as usize))
    }

    /// Reserves `host`'s next politeness slot (`reserve_slot` in the
    /// scripts): how long to wait for it, and the spacing applied.
    pub fn reserve(
        &mut self,
        options: &Options,
        host: &str,
        now: u64,
        floor: u64,
    ) -> (Duration, Duration) {
        let pacing = options.pacing;
        let base = pacing.interval.as_millis() as u64;
        let mut interval = base;
        if pacing.jitter && base > 0 {
            self.jitter_salt = self.jitter_salt.wrapping_add(1);
            let seed = u64::from(std::process::id()) ^ now;
            interval = jittered(base, seed, self.jitter_salt);
        }
        self.hosts
            .entry(host.to_string())
            .or_default()
            .reserve(now, interval.max(floor))
    }

    /// The first step of a commit (`commit.lua`): whether `id` is leased by
    /// `worker`; if so the lease ends here.
    pub fn end_lease(&mut self, id: &str, worker: &str) -> Option<Lease> {
        match self.leases.get(id) {
            Some(lease) if lease.worker == worker => self.leases.remove(id),
            _ => None,
        }
    }

    /// Writes what a page brings (`commit.lua`, after the lease check):
    /// its stats, retry, dead letter, failure, host news, revisit, new
    /// requests and items. Returns (enqueued, filtered).
    pub fn commit_page(
        &mut self,
        options: &Options,
        lease: Lease,
        page: &PageResult,
        now: u64,
    ) -> (u64, u64) {
        self.lease_expiries.remove(&lease.place.1);
        for (field, delta) in page.stats.iter() {
            self.add(&field, delta);
        }
        if let Some(retry) = &page.retry {
            let seq = self.seq();
            let due = now + retry.delay.as_millis() as u64;
            let place = (-clamped(retry.request.priority), seq);
            self.delayed
                .insert((due, seq), (place, retry.request.clone()));
        }
        if let Some(dead) = &page.dead {
            self.dead.push(dead.clone());
            self.count_stat(stats::DEADLETTER_COUNT, 1);
        }
        if let Some(failed) = &page.failed {
            self.failed.push(failed.clone());
            self.count_stat(stats::FAILED_COUNT, 1);
        }
        let host = lease.request.host_key();
        let backoff_max = options.pacing.backoff_max.as_millis() as u64;
        let state = self.hosts.entry(host).or_default();
        if state.news(page.host, now, backoff_max) == HostNews::Slowed {
            self.count_stat(stats::BACKOFF_SLOWED, 1);
        }
        self.revisit(page.revisit.as_ref(), now);
        let (enqueued, filtered) = self.enqueue_all(&page.requests);
        self.sink.write(&page.items);
        (enqueued, filtered)
    }

    /// Schedules or drops a page's revisit; either way it is no longer
    /// overdue.
    fn revisit(&mut self, revisit: Option<&Revisit>, now: u64) {
        match revisit {
            Some(Revisit::At { request, after }) => {
                let fp = request.fingerprint();
                self.schedule_due.remove(&fp);
                self.unschedule(&fp);
                let due = now + after.as_millis() as u64;
                self.schedule_order.insert((due, fp.clone()), ());
                self.schedule.insert(fp, (due, request.clone()));
            }
            Some(Revisit::Drop { request }) => {
                let fp = request.fingerprint();
                self.schedule_due.remove(&fp);
                if self.unschedule(&fp) {
                    self.count_stat(stats::REVISIT_DROPPED, 1);
                }
            }
            None => {}
        }
    }

    /// Queues a page's new requests through the dupefilter and counts them;
    /// returns (enqueued, filtered).
    fn enqueue_all(&mut self, requests: &[Request]) -> (u64, u64) {
        let (mut enqueued, mut filtered) = (0, 0);
        for request in requests {
            if self.enqueue(request) {
                enqueued += 1;
            } else {
                filtered += 1;
            }
        }
        if enqueued > 0 {
            let depth = requests.iter().map(|r| r.depth).max().unwrap_or(0);
            self.max(stats::REQUEST_DEPTH_MAX.name, i64::from(depth));
        }
        self.count_stat(stats::SCHEDULER_ENQUEUED, enqueued);
        self.count_stat(stats::DUPEFILTER_FILTERED, filtered);
        (enqueued as u64, filtered as u64)
    }

    /// Extends `worker`'s leases on `ids` to `deadline` (`renew.lua`);
    /// returns the ids it does not hold.
    pub fn renew(&mut self, worker: &str, ids: &[String], deadline: u64) -> Vec<String> {
        let mut lost = Vec::new();
        for id in ids {
            match self.leases.get_mut(id) {
                Some(lease) if lease.worker == worker => lease.deadline = deadline,
                _ => lost.push(id.clone()),
            }
        }
        lost
    }

    /// Hands `worker`'s leases on `ids` back to the queue at their places,
    /// giving back their hosts' page counts (`release.lua`).
    pub fn release(&mut self, worker: &str, ids: &[String]) -> u64 {
        let mut n = 0;
        for id in ids {
            let Some(lease) = self.end_lease(id, worker) else {
                continue;
            };
            if let Some(pages) = self.host_pages.get_mut(&lease.request.host_key()) {
                *pages = pages.saturating_sub(1);
            }
            self.queue.insert(lease.place, lease.request);
            n += 1;
        }
        n
    }

    /// Claims start entries (`claim_start.lua`): each leaves the start list
    /// and becomes a queued request or a dead letter.
    pub fn claim(&mut self, start_key: &str, claims: &[StartClaim]) -> Claimed {
        let mut done = Claimed::default();
        for c in claims {
            let Some(at) = self.start.iter().position(|e| *e == c.entry) else {
                continue;
            };
            self.start.remove(at);
            done.claimed += 1;
            match &c.outcome {
                Ok(request) if self.enqueue(request) => done.enqueued += 1,
                Ok(_) => done.filtered += 1,
                Err(Refused { reason, stat }) => {
                    self.dead.push(DeadLetter::new(start_key, &c.entry, reason));
                    done.dead += 1;
                    if let Some(stat) = stat {
                        self.count_stat(**stat, 1);
                    }
                }
            }
        }
        self.add(stats::SCHEDULER_ENQUEUED.name, done.enqueued as i64);
        self.add(stats::DUPEFILTER_FILTERED.name, done.filtered as i64);
        self.add(stats::DEADLETTER_COUNT.name, done.dead as i64);
        self.add(stats::START_URLS_CLAIMED.name, done.claimed as i64);
        done
    }

    /// When the next thing nothing announces may be due: a retry, a
    /// parked host's turn, a revisit, a lease expiring.
    pub fn next_due(&self, now: u64) -> Option<Duration> {
        let clock = |ms: u64| Instant::now() + Duration::from_millis(ms.saturating_sub(now));
        [
            self.delayed.keys().next().map(|(due, _)| clock(*due)),
            self.parked_turns.values().min().map(|turn| clock(*turn)),
            self.schedule_order
                .keys()
                .next()
                .map(|(due, _)| clock(*due)),
            self.leases.values().map(|l| l.deadline).min().map(clock),
        ]
        .into_iter()
        .flatten()
        .min()
        .map(|at| at.saturating_duration_since(Instant::now()))
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
}
