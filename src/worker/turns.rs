//! A spider's loop, turn by turn: lease for the room there is (claiming
//! start entries when the queue cannot fill it), start a page task per
//! leased request, then wait, for a page to finish when busy, or for a
//! wake-up when idle, until a stop rule, a stop signal or a fatal error
//! ends it. Each step is a method of [`Turns`], which keeps what the loop
//! carries from one turn to the next.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use super::{
    page, preview, SpiderRun, StopReason, StopRules, LEASES_PER_SLOT, QUIET_RECHECK,
    WAITING_PER_SLOT,
};
use crate::frontier::outage::{with_redis, Fatal};
use crate::frontier::pickup::StartWatch;
use crate::frontier::wake::Wake;
use crate::frontier::{Heartbeat, Leased, QueueStatus, Refused, StartClaim};
use crate::stats::Tally;

/// How often an idle worker of a crawl with pages in flight elsewhere
/// reads its status all the same (see `Turns::may_be_drained`).
const STATUS_EVERY: Duration = Duration::from_secs(5);

/// What the loop keeps between turns.
pub(super) struct Turns<'a> {
    run: &'a SpiderRun,
    rules: StopRules,
    shutdown: watch::Receiver<bool>,
    /// While set (the spider is paused), nothing is leased.
    paused: watch::Receiver<bool>,
    fatal: Fatal,
    pub wake: Wake,
    /// The start key's watch, for entries pushed without a wake-up.
    pub start_watch: StartWatch,
    /// Each page task returns the requests its commit leased to replace it.
    pub tasks: JoinSet<Vec<Leased>>,
    idle_since: Instant,
    /// When this worker last said it waits for other workers' leases.
    said_waiting: Option<Instant>,
    /// When it last said it waits for spiders that hand it work, if the
    /// last look found it waiting for them.
    said_upstreams: Option<Instant>,
    /// The last look at the crawl found this spider drained but for its
    /// upstreams: their finishing announces nothing, so look again soon.
    waits_for_upstreams: bool,
    /// When it last read the crawl's status (`--until-drained`).
    status_read: Option<Instant>,
    /// The loop's last lease got less than it asked for: it asks again
    /// only once something may be there (a wake-up: a commit that queues
    /// work wakes the workers waiting for it; or `idle_recheck`), not on
    /// every page that finishes. Its pages' commits still lease.
    quiet: bool,
}

/// The room for leases at the start of a turn.
struct Room {
    /// This spider's share of the worker's download slots.
    concurrency: usize,
    /// The leases the loop fills up to.
    leases: usize,
    /// How many to lease now.
    free: usize,
    /// Whether it holds as many requests waiting for their hosts' slots
    /// as it will ([`WAITING_PER_SLOT`] per slot).
    waiting_full: bool,
}

/// What leasing for the room found.
enum Leasing {
    /// Nothing was asked (no room), or Redis could not be asked because
    /// the worker stops.
    Nothing { stopping: bool },
    /// Start entries were claimed: look again at once.
    Claimed,
    /// `got` requests leased; whether the start key looked empty.
    Leased { got: usize, start_empty: bool },
}

impl<'a> Turns<'a> {
    pub async fn new(
        run: &'a SpiderRun,
        rules: StopRules,
        shutdown: watch::Receiver<bool>,
    ) -> Turns<'a> {
        let frontier = &run.frontier;
        Turns {
            run,
            rules,
            shutdown,
            paused: run.paused(),
            fatal: frontier.fatal(),
            wake: frontier.wake(),
            // Entries other producers push publish no wake-up: watched apart.
            start_watch: frontier.watch_start(run.settings.idle_recheck).await,
            tasks: JoinSet::new(),
            idle_since: Instant::now(),
            said_waiting: None,
            said_upstreams: None,
            waits_for_upstreams: false,
            status_read: None,
            quiet: false,
        }
    }

    /// Runs turns until one ends the loop.
    pub async fn run(&mut self) -> StopReason {
        loop {
            if let Some(reason) = self.turn().await {
                return reason;
            }
        }
    }

    /// One turn of the loop; `Some` when it ends the loop.
    async fn turn(&mut self) -> Option<StopReason> {
        // A fatal Redis error (see outage::Fatal) ends the loop as a stop
        // does; what follows tells them apart.
        if *self.shutdown.borrow() || self.fatal.get().is_some() {
            return Some(StopReason::Shutdown);
        }
        let room = self.room();
        // Holding as many requests waiting for their hosts' slots as it
        // will, the worker leases only those due now (the others are
        // parked), so it keeps leasing other hosts' work and claiming
        // start entries whatever the paced hosts' backlogs.
        self.run.frontier.lease_due_only(room.waiting_full);
        self.run
            .frontier
            .slots_idle(room.concurrency.saturating_sub(self.busy()));
        // Paused: the frontier would lease nothing; the pages in flight
        // finish (those not yet downloading go back to the queue). Busy
        // and short of work: nothing to ask for until a wake-up.
        let paused = *self.paused.borrow_and_update();
        let free = if paused || (self.quiet && !self.tasks.is_empty()) {
            0
        } else {
            room.free
        };
        if paused {
            self.stay_in_crew().await;
        }
        let (got, start_empty) = match self.lease_for_room(free).await {
            Leasing::Nothing { stopping: true } | Leasing::Claimed => return None,
            Leasing::Nothing { stopping: false } => (0, false),
            Leasing::Leased { got, start_empty } => {
                self.quiet = got < free;
                (got, start_empty)
            }
        };
        if got > 0 || !self.tasks.is_empty() {
            self.idle_since = Instant::now();
            self.run.share.set_active(true);
            self.start_watch.disarm();
        }
        if self.tasks.is_empty() && got == 0 {
            return self.when_idle(start_empty).await;
        }
        self.wait_busy(&room).await;
        None
    }

    /// How many requests to lease now. Pages not waiting for their host's
    /// turn take a download slot, or wait for one (see
    /// `pool::Share::lease_limit`); the leases held stay within a bound.
    /// (Free semaphore permits would overcount: a replacement page just
    /// spawned has not taken its permit yet.) While commits in flight
    /// lease, they also fill the leases held ahead; the loop leases only
    /// for idle slots then, not on every wake-up a commit's new links
    /// publish. Pages waiting for their host's turn take no room: a slow
    /// host's pages leased ahead never keep the worker from other hosts'
    /// work or new start entries (up to [`WAITING_PER_SLOT`] of them; past
    /// that, it leases only requests due now).
    fn room(&self) -> Room {
        let share = &self.run.share;
        // This spider's share of the worker's slots, which changes as the
        // worker's other spiders get work or run out of it.
        let concurrency = share.limit();
        let leases = if share.leasing() {
            concurrency
        } else {
            share.lease_limit()
        };
        let free = leases
            .saturating_sub(self.busy())
            .min(Self::max_tasks(concurrency).saturating_sub(self.tasks.len()));
        Room {
            concurrency,
            leases,
            free,
            waiting_full: share.waiting() >= concurrency * WAITING_PER_SLOT,
        }
    }

    /// The page tasks a spider of `concurrency` slots may hold: those
    /// downloading or waiting for a download slot, and those waiting for
    /// their host's politeness slot.
    fn max_tasks(concurrency: usize) -> usize {
        concurrency * (LEASES_PER_SLOT + WAITING_PER_SLOT)
    }

    /// Pages in flight that hold, wait for or are about to take a download
    /// slot, or are being committed (not waiting for their host's turn).
    fn busy(&self) -> usize {
        self.tasks
            .len()
            .saturating_sub(self.run.downloader.politeness().waiting())
    }

    /// Leases for the room there is and starts the pages; claims start
    /// entries when the queue could not fill it.
    /// A paused worker leases nothing but stays one of the crawl's
    /// workers (a lease of none renews it), so that on `resume` the work
    /// is shared among all of them, not taken by the first to ask.
    async fn stay_in_crew(&self) {
        let run = self.run;
        let _ = with_redis(
            "stay one of the crawl's workers",
            &self.shutdown,
            &self.fatal,
            || run.frontier.lease(0, 0),
        )
        .await;
    }

    async fn lease_for_room(&mut self, room: usize) -> Leasing {
        if room == 0 {
            return Leasing::Nothing { stopping: false };
        }
        let run = self.run;
        // Leases another worker's commit handed this one: no need to ask.
        let handed = run.frontier.take_handed();
        if !handed.is_empty() {
            let got = handed.len();
            run.share.leased(got, got);
            self.start_leased(handed);
            return Leasing::Leased {
                got,
                start_empty: false,
            };
        }
        let peek = run.spider.start.batch_size.min(room);
        let asked = Instant::now();
        let Some((leased, start)) =
            with_redis("lease requests", &self.shutdown, &self.fatal, || {
                run.frontier.lease(room, peek)
            })
            .await
        else {
            return Leasing::Nothing { stopping: true };
        };
        if let Some(m) = &run.metrics {
            m.observe_redis(&run.spider.name, "lease", asked.elapsed().as_secs_f64());
        }
        let got = leased.len();
        run.share.leased(room, got);
        self.start_leased(leased);
        let start_empty = start.is_empty();
        if got < room && !start_empty && self.claim_start(start).await > 0 {
            self.idle_since = Instant::now();
            return Leasing::Claimed;
        }
        Leasing::Leased { got, start_empty }
    }

    /// Counts leased requests in the metrics and starts their pages.
    fn start_leased(&mut self, leased: Vec<Leased>) {
        if let Some(m) = &self.run.metrics {
            let mut t = Tally::default();
            t.add(crate::stats::SCHEDULER_DEQUEUED, leased.len() as i64);
            m.count(&self.run.spider.name, &t);
        }
        self.spawn_pages(leased);
    }

    /// Starts a page task per leased request.
    fn spawn_pages(&mut self, leased: Vec<Leased>) {
        let run = self.run;
        run.share.started(leased.len());
        for l in leased {
            if let Ok(mut set) = run.inflight.lock() {
                set.insert(l.id.clone());
            }
            // Only a request that will wait for its slot (a dead letter
            // does not) is counted as waiting.
            if l.request.is_ok() && !l.wait.is_zero() {
                run.downloader.politeness().will_wait();
            }
            // Page tasks log inside the spider's span (spider, worker).
            // The task is boxed before it is spawned: a page's future holds
            // every step of its crawl (about 8.8 KB), and tokio moves the
            // future it is given several times on its way into a task and
            // its output out of it; boxed, it is copied once (10 % of a
            // worker's instructions per page, scripts/bench/worker_instructions.sh).
            let context = run.page_context(&self.shutdown);
            self.tasks
                .spawn(Box::pin(page::crawl(context, l)).in_current_span());
        }
    }

    /// Converts and claims start entries; returns how many were claimed.
    async fn claim_start(&self, entries: Vec<String>) -> u64 {
        let run = self.run;
        let claims: Vec<StartClaim> = entries
            .into_iter()
            .map(|entry| {
                let outcome = run.spider.start_request(&entry).map_err(Refused::from);
                if let Err(refused) = &outcome {
                    tracing::warn!(key = %run.frontier.keys().start_urls, entry = %preview(&entry), reason = %preview(&refused.reason), "start entry set aside in the dead-letter key");
                }
                StartClaim { entry, outcome }
            })
            .collect();
        let claimed = with_redis("claim start entries", &self.shutdown, &self.fatal, || {
            run.frontier.claim_start(&claims)
        })
        .await;
        let Some(c) = claimed else {
            return 0;
        };
        if let Some(m) = &run.metrics {
            let mut t = Tally::default();
            t.add(crate::stats::SCHEDULER_ENQUEUED, c.enqueued as i64);
            t.add(crate::stats::DUPEFILTER_FILTERED, c.filtered as i64);
            t.add(crate::stats::DEADLETTER_COUNT, c.dead as i64);
            m.count(&run.spider.name, &t);
        }
        tracing::debug!(
            claimed = c.claimed,
            enqueued = c.enqueued,
            filtered = c.filtered,
            dead = c.dead,
            "start entries claimed"
        );
        // Entries claimed but filtered or dead still mean progress.
        c.enqueued + c.filtered + c.dead
    }

    /// Nothing leased and nothing in flight: stop if a stop rule says so,
    /// else wait for work.
    async fn when_idle(&mut self, start_empty: bool) -> Option<StopReason> {
        self.run.share.set_active(false);
        if self.rules.until_drained && self.may_be_drained() {
            if let Some(reason) = self.drained().await {
                return Some(reason);
            }
        }
        if self
            .rules
            .idle_exit
            .is_some_and(|d| self.idle_since.elapsed() >= d)
        {
            return Some(StopReason::Idle);
        }
        if start_empty {
            self.start_watch.arm();
        }
        let wait = self.idle_wait();
        tokio::select! {
            _ = self.wake.wait(wait) => {}
            _ = self.start_watch.changed() => {}
            _ = self.shutdown.changed() => {}
            _ = self.paused.changed() => {}
            _ = self.fatal.raised() => {}
        }
        None
    }

    /// Whether the crawl may be drained, so that the status is worth
    /// reading: not while the last lease saw pages in flight (the commit
    /// of a crawl's last page wakes every idle worker), unless the status
    /// was last read [`STATUS_EVERY`] ago (what it says is logged).
    fn may_be_drained(&self) -> bool {
        self.run.frontier.in_flight_seen().is_none_or(|n| n == 0)
            || self.status_read.is_none_or(|t| t.elapsed() >= STATUS_EVERY)
            || self.waits_for_upstreams
    }

    /// For `--until-drained`: whether the whole crawl is finished (or has
    /// reached `max_pages`): this spider's queues and those of every
    /// spider that hands it work, read in one step, are empty. Says so
    /// when only other workers' leases, or those spiders, keep it open.
    async fn drained(&mut self) -> Option<StopReason> {
        let run = self.run;
        self.status_read = Some(Instant::now());
        let status = with_redis("read queue status", &self.shutdown, &self.fatal, || {
            run.frontier.status()
        })
        .await?;
        if status.drained() {
            return Some(StopReason::Drained);
        }
        // What waits in an outbox is on its way whatever the limit: this
        // worker's movers deliver it first.
        if status.page_limit_reached && status.inflight == 0 && status.outboxed == 0 {
            return Some(StopReason::PageLimit);
        }
        self.waits_for_upstreams = status.own_drained();
        self.say_waiting_for_leases(&status).await;
        self.say_waiting_for_upstreams(&status);
        None
    }

    /// Only spiders that hand this one work keep the crawl open: says
    /// which and what they still have, when it starts waiting and every
    /// 15 s at most.
    fn say_waiting_for_upstreams(&mut self, status: &QueueStatus) {
        if !self.waits_for_upstreams {
            self.said_upstreams = None;
            return;
        }
        if self
            .said_upstreams
            .is_some_and(|t| t.elapsed() < Duration::from_secs(15))
        {
            return;
        }
        let waited: Vec<String> = status
            .producing()
            .map(|u| {
                let through = u
                    .hands_to
                    .as_ref()
                    .map_or(String::new(), |to| format!(", through `{to}`"));
                format!("`{}` ({}{through})", u.spider, u.describe())
            })
            .collect();
        tracing::info!(
            spider = %self.run.spider.name,
            "nothing to do yet; waiting for the spiders that hand this one work to finish (--until-drained): {}",
            waited.join("; ")
        );
        self.said_upstreams = Some(Instant::now());
    }

    /// Only other workers' leases keep the crawl open. Said every 15 s at
    /// most, as it is: pages in flight at live workers (the links they
    /// find come next), or leases of workers that stopped without handing
    /// them back (they return when they expire).
    async fn say_waiting_for_leases(&mut self, status: &QueueStatus) {
        let only_leases = status.inflight > 0
            && status.queued == 0
            && status.start == 0
            && status.delayed == 0
            && self.run.inflight_ids().is_empty();
        let due = self
            .said_waiting
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(15));
        if !(only_leases && due) {
            return;
        }
        self.said_waiting = Some(Instant::now());
        let pages = crate::wording::count(status.inflight as usize, "page");
        let lease = self.run.settings.lease_timeout;
        let Ok(workers) = self.run.frontier.workers().await else {
            return;
        };
        let me = self.run.frontier.worker();
        let live = live_others(&workers, me, Heartbeat::gone_after(lease));
        if live > 0 {
            tracing::info!(
                spider = %self.run.spider.name,
                "nothing to lease yet: {pages} in flight at {}; waiting for the links they find",
                crate::wording::count(live, "other worker")
            );
        } else {
            tracing::info!(
                spider = %self.run.spider.name,
                "waiting for {pages} leased by a worker that stopped without handing them back (no heartbeat); they return to the queue when its leases expire, within {}",
                humantime::format_duration(lease)
            );
        }
    }

    /// How long an idle spider waits before it looks again. Work that
    /// announces itself comes with a wake-up; the rest is polled for every
    /// `idle_recheck`, unless the start key's watch sees it all (then only
    /// as a safety net). Retries, expired leases, revisits and politeness
    /// slots coming due: be there when they do.
    fn idle_wait(&self) -> Duration {
        let mut wait = self.run.settings.idle_recheck;
        if self.start_watch.covers() && self.wake.live() {
            wait = wait.max(QUIET_RECHECK);
        }
        if let Some(due) = self.run.frontier.next_due_in() {
            wait = wait.min(due + Duration::from_millis(1));
        }
        if self.waits_for_upstreams {
            wait = wait.min(self.run.settings.idle_recheck);
        }
        if let Some(d) = self.rules.idle_exit {
            let left = d.saturating_sub(self.idle_since.elapsed());
            wait = wait.min(left.max(Duration::from_millis(10)));
        }
        wait
    }

    /// Busy: waits for a page to finish (and starts the requests its commit
    /// leased), or for new work if there was room at the turn's start.
    async fn wait_busy(&mut self, room: &Room) {
        let share = &self.run.share;
        let room_for_more =
            self.tasks.len() < Self::max_tasks(room.concurrency) && self.busy() < room.leases;
        tokio::select! {
            Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                if let Ok(next) = done {
                    self.spawn_pages(next);
                }
            }
            // A wake-up, or `idle_recheck` as a safety net: look again.
            _ = self.wake.wait(self.run.settings.idle_recheck), if room_for_more => {
                self.quiet = false;
            }
            // Another spider's share changed the room.
            _ = tokio::time::sleep(Duration::from_millis(250)), if share.limit() != room.concurrency => {}
            _ = self.shutdown.changed() => {}
            _ = self.paused.changed() => {}
            _ = self.fatal.raised() => {}
        }
    }
}

/// The workers other than `me` whose heartbeat is fresher than `gone_after`.
fn live_others(workers: &[(String, Heartbeat)], me: &str, gone_after: Duration) -> usize {
    let now = crate::frontier::now_secs();
    workers
        .iter()
        .filter(|(id, beat)| id != me && now - beat.heartbeat <= gone_after.as_secs_f64())
        .count()
}
