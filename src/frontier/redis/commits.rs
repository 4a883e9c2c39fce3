//! Committing pages in batches: the pages a worker finishes while its
//! previous commit is on its way to Redis go to Redis together, in one call
//! of `scripts/commit.lua`. Each page is still all-or-nothing and still
//! committed only while its lease is this worker's; a batch only shares the
//! script call's fixed cost (the round trip, the clock, the stats writes,
//! the wake-up, the lease of replacements) between its pages. That cost is
//! most of what a page costs Redis, so batching is what lets one Redis
//! serve many busy workers.
//!
//! A batch also waits for more pages while every page in it may wait, and
//! only as long as the wait leaves no slot idle: each page says how many
//! pages' time its worker's slots stay busy on requests held ahead (see
//! `worker::pool`), and the task turns that into time at the pace it
//! measures, less a call's round trip, never past `commit_wait` (see
//! [`crate::frontier::patience`]). The first page whose slot would idle
//! until its replacement arrives sends the batch at once. A worker of slow
//! pages so commits about as many pages a call as it holds leases ahead; a
//! worker of fast pages (whose requests ahead last less than a round
//! trip) sends each batch as soon as the previous call is back; and one
//! whose every next request depends on the last commit (the tail of a
//! crawl, a chain of pages) commits each page as soon as it can.
//!
//! One task per frontier sends the batches, one at a time; a page's
//! [`RedisFrontier::commit`] hands its encoded page to it and waits for its own
//! result. The task rides out Redis outages as a page's commit always did
//! (see [`crate::frontier::outage::until_done`]): a commit, once started, finishes.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use super::protocol::{
    CommitArgs, HandoffRecord, LinkRecord, LinksAheadArgs, PageRareRecord, PageRecord, StatRecord,
    TaskRecord, Wire,
};
use super::scripts::SCRIPTS;
use super::{
    clamped, encode, fingerprint_arg, flag, ms, to_json, Committed, HostOutcome, Leased,
    PageResult, RedisFrontier, Result, Revisit, MAX_REQUEST_BYTES,
};
use crate::frontier::fairness;
use crate::frontier::patience::{Pace, Patience};
use crate::request::{Request, Task};
use crate::stats::{self, Tally};

/// At most this many pages go in one script call…
const MAX_PAGES: usize = 64;
/// …and at most about this many bytes of arguments (one page over it goes
/// alone), so one call never keeps Redis busy for long.
const MAX_BYTES: usize = 1 << 20;
/// At most this many of a page's links go in one script call (each costs
/// Redis a dupefilter look-up and a queue entry, a few microseconds): a
/// page with more sends the rest ahead of its commit in parts of this
/// many (see [`RedisFrontier::queue_ahead`]).
const MAX_LINKS: usize = 4096;
/// How often a commit also puts work that came due back in the queue
/// (expired leases, retries, revisits). The lease script always does; a
/// busy worker leases only through commits.
const RELEASE_EVERY: Duration = Duration::from_millis(200);

/// One page's part of a commit script's arguments, encoded by the page's
/// own task.
pub(super) struct PageArgs {
    /// Its record, tasks, links and items (see `commit` in
    /// [`super::protocol`]).
    args: Vec<Vec<u8>>,
    /// Its stats increments, summed with the batch's other pages'.
    stats: Vec<(String, i64)>,
    bytes: usize,
    lease_next: usize,
    /// How long it may wait for others (see the module docs).
    patience: Patience,
    /// Leased by a sharded spider's worker visiting this shard (its home
    /// is another, see `sharded`): its replacements are leased only while
    /// the shard has no crew of its own.
    visit: bool,
}

/// A page waiting for its batch: its arguments and where its result goes.
pub(super) struct Pending {
    page: PageArgs,
    /// When its page was handed to the task.
    at: tokio::time::Instant,
    reply: oneshot::Sender<(Committed, Vec<Leased>)>,
}

/// The sending side of a frontier's commit task, started by its first
/// commit (a frontier used only by `stats` or `push-urls` never starts
/// one). Dropping the last frontier clone stops the task.
pub(super) type Batcher = Arc<std::sync::OnceLock<mpsc::UnboundedSender<Pending>>>;

impl RedisFrontier {
    /// Commits one page (see the module docs), then leases up to
    /// `lease_next` requests to replace it. Its batch may wait for other
    /// pages as long as its `patience` allows (see the module docs).
    pub async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        patience: Patience,
    ) -> Result<(Committed, Vec<Leased>)> {
        self.commit_as(leased, page, lease_next, patience, false)
            .await
    }

    /// A commit (see [`RedisFrontier::commit`]) by a worker of a sharded
    /// spider, on its home shard or (`visit`) another: a visitor's
    /// replacements are leased only while the shard has no crew, no
    /// worker whose home it is, and it does not join the crew.
    pub async fn commit_as(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        patience: Patience,
        visit: bool,
    ) -> Result<(Committed, Vec<Leased>)> {
        let mut split = LinkSplit::of(page);
        let early = match self.queue_ahead(leased, page, &mut split).await? {
            Some(early) => early,
            None => {
                self.let_go(1);
                return Ok((Committed::LeaseLost, Vec::new()));
            }
        };
        let mut args = self.page_args(leased, page, &split, lease_next);
        args.patience = patience;
        args.visit = visit;
        let batcher = self.batcher.get_or_init(|| self.start_batcher());
        let (reply, result) = oneshot::channel();
        let done = if let Err(mpsc::error::SendError(pending)) = batcher.send(Pending {
            page: args,
            at: tokio::time::Instant::now(),
            reply,
        }) {
            // Cannot happen while `self` lives; commit alone all the same.
            self.commit_alone(pending.page).await?
        } else {
            match result.await {
                Ok(done) => done,
                // The task ended without answering (the runtime is shutting
                // down): the page may or may not be committed; a repeat
                // finds out safely.
                Err(_) => {
                    let mut args = self.page_args(leased, page, &split, lease_next);
                    args.visit = visit;
                    self.commit_alone(args).await?
                }
            }
        };
        Ok(early.add_to(done))
    }

    /// Queues the links `split` sends ahead of `page`'s commit, a part of
    /// at most [`MAX_LINKS`] links (and about [`MAX_BYTES`]) per script
    /// call, each only while the page's lease is this worker's. Returns
    /// what they queued and filtered, or `None` once the lease is lost
    /// (the parts queued before stay: the page's next fetch finds them in
    /// the dupefilter). Counts the links over the size bound in `split`.
    async fn queue_ahead(
        &self,
        leased: &Leased,
        page: &PageResult,
        split: &mut LinkSplit,
    ) -> Result<Option<Early>> {
        let mut early = Early::default();
        let depth = page.requests.iter().map(|r| r.depth).max().unwrap_or(0);
        let mut part = Vec::new();
        let mut bytes = 0;
        let ahead = page.requests.iter().filter(|r| !r.dont_filter);
        // In a sharded spider, the links of other shards go to their outboxes.
        let mut elsewhere: Vec<(usize, &Request)> = Vec::new();
        for (i, request) in ahead.take(split.ahead).enumerate() {
            if let Some(to) = self.shard.and_then(|place| place.elsewhere(request)) {
                elsewhere.push((to, request));
            } else {
                match link_record(request) {
                    Some(link) => {
                        bytes += link.json.len() + link.fingerprint.len();
                        part.push(link);
                    }
                    None => split.oversized += 1,
                }
            }
            let last = i + 1 == split.ahead;
            if part.len() >= MAX_LINKS || bytes >= MAX_BYTES || (last && !part.is_empty()) {
                match self.send_ahead(leased, depth, &part).await? {
                    Some((enqueued, filtered)) => {
                        early.enqueued += enqueued;
                        early.filtered += filtered;
                    }
                    None => return Ok(None),
                }
                part.clear();
                bytes = 0;
            }
        }
        split.oversized += self.hand_ahead(&elsewhere).await?;
        Ok(Some(early))
    }

    /// Pushes the links of other shards a page sends ahead of its commit
    /// to this shard's outboxes, [`MAX_LINKS`] per script call. Like the
    /// links queued ahead these have fingerprints, so a repeat (the page
    /// fetched again after its worker died) is filtered where they are
    /// delivered. Returns how many were over the size bound.
    async fn hand_ahead(&self, links: &[(usize, &Request)]) -> Result<usize> {
        let mut oversized = 0;
        for to in self.shard.iter().flat_map(|place| place.others()) {
            let mine: Vec<&Request> = links
                .iter()
                .filter(|(t, _)| *t == to)
                .map(|(_, r)| *r)
                .collect();
            for part in mine.chunks(MAX_LINKS) {
                let pushed = crate::frontier::outage::until_done(
                    "hand a page's links to another shard",
                    &self.fatal,
                    || self.outbox_push(to, part.iter().copied()),
                )
                .await;
                oversized += part.len() - pushed as usize;
            }
        }
        Ok(oversized)
    }

    /// One call of `links_ahead.lua`: what `links` queued and filtered, or
    /// `None` when the lease is no longer this worker's. Rides out Redis
    /// outages as a commit does: a repeat of a part that went through
    /// finds its links in the dupefilter.
    async fn send_ahead(
        &self,
        leased: &Leased,
        depth: u32,
        links: &[LinkRecord],
    ) -> Result<Option<(u64, u64)>> {
        let k = &self.keys;
        let reply: Vec<i64> =
            crate::frontier::outage::until_done("queue a page's links", &self.fatal, || {
                let mut invocation = SCRIPTS.links_ahead.call(
                    k,
                    self.sink.sink,
                    LinksAheadArgs {
                        worker: self.worker.clone(),
                        id: leased.id.clone(),
                        wake: k.wake.clone(),
                        dupe_spec: self.dupe_spec.clone(),
                        depth: depth.to_string(),
                    },
                );
                for link in links {
                    invocation.record(link.clone());
                }
                let mut conn = self.conn.clone();
                async move {
                    invocation
                        .invoke_async(&mut conn)
                        .await
                        .map_err(super::err("queue a page's links", &k.requests))
                }
            })
            .await;
        Ok(match reply.as_slice() {
            [1, enqueued, filtered] => Some((*enqueued as u64, *filtered as u64)),
            _ => None,
        })
    }

    /// Commits one page in a script call of its own.
    async fn commit_alone(&self, page: PageArgs) -> Result<(Committed, Vec<Leased>)> {
        let mut done = self.commit_batch(std::slice::from_ref(&page), true).await?;
        Ok(done.pop().unwrap_or((Committed::LeaseLost, Vec::new())))
    }

    fn start_batcher(&self) -> mpsc::UnboundedSender<Pending> {
        let (tx, rx) = mpsc::unbounded_channel();
        // The task's own frontier has a batcher of its own, never started,
        // so it does not keep its channel open.
        let mut frontier = self.clone();
        frontier.batcher = Batcher::default();
        tokio::spawn(send_batches(frontier, rx));
        tx
    }

    /// A link handed to another shard (`target`: its place among the
    /// commit's targets, from 1), unless it is over the size bound: its
    /// entry is the request's JSON, and without fingerprint it has a
    /// token (see `scripts/lib/outbox.lua`).
    fn shard_task(&self, request: &Request, target: usize) -> Option<TaskRecord> {
        Some(TaskRecord {
            spider: target.to_string(),
            fingerprint: fingerprint_arg(request),
            priority: clamped(request.priority).to_string(),
            entry: encode(request)?,
            token: if request.dont_filter {
                super::outbox::hand_token(&self.worker)
            } else {
                String::new()
            },
        })
    }

    /// A link handed to another spider, unless its task is over the size
    /// bound. In a sharded spider it waits in an outbox with a token of its
    /// own (the other spider's inbox remembers it, see
    /// `scripts/handoff_deliver.lua`): this shard's hand-off outbox for the
    /// spider, or, when the link's host is another shard's, that shard's
    /// outbox, whose dupefilter decides it (its token then names the
    /// spider: `to:<spider>:<token>`, see `scripts/outbox_deliver.lua`).
    fn handoff_task(&self, task: &Task) -> Option<TaskRecord> {
        let mut record = task_record(task)?;
        let Some(place) = self.shard else {
            return Some(record);
        };
        let token = super::outbox::hand_token(&self.worker);
        match place.elsewhere(&task.request) {
            Some(to) => {
                let spider = &self.handoffs[task.to].spider;
                record.spider = (self.handoffs.len() + place.position_of(to) + 1).to_string();
                record.token = format!("to:{spider}:{token}");
            }
            None => record.token = token,
        }
        Some(record)
    }

    /// One page's arguments: its [`PageRecord`] (and [`PageRareRecord`]),
    /// then its tasks, links and items (see `commit` in [`super::protocol`]).
    pub(super) fn page_args(
        &self,
        leased: &Leased,
        page: &PageResult,
        split: &LinkSplit,
        lease_next: usize,
    ) -> PageArgs {
        let mut tasks: Vec<TaskRecord> = page
            .tasks
            .iter()
            .filter(|t| t.to < self.handoffs.len())
            .filter_map(|t| self.handoff_task(t))
            .collect();
        let handed = tasks.len();
        // In a sharded spider, the links of other shards go to their
        // outboxes, which follow the hand-offs among the commit's targets.
        let mut links: Vec<LinkRecord> = Vec::new();
        for request in split.left(page) {
            match self
                .shard
                .and_then(|place| Some((place, place.elsewhere(request)?)))
            {
                Some((place, to)) => {
                    let target = self.handoffs.len() + place.position_of(to) + 1;
                    tasks.extend(self.shard_task(request, target));
                }
                None => links.extend(link_record(request)),
            }
        }
        // Requests over the size bound are not queued; say so and count them.
        // The links sent ahead are `split.ahead` of the page's requests.
        let carried = page.requests.len() - split.ahead;
        let oversized = carried - links.len() - (tasks.len() - handed) + page.tasks.len() - handed
            + split.oversized;
        let mut extra = Tally::default();
        extra.add(stats::SCHEDULER_REQUEST_TOO_LARGE, oversized as i64);
        if oversized > 0 {
            tracing::warn!(
                id = %leased.id,
                count = oversized,
                "follow-up requests over {MAX_REQUEST_BYTES} bytes were not queued"
            );
        }
        let (record, rare) = page_record(leased, page, lease_next, links.len(), tasks.len());
        let mut args = Vec::new();
        record.write_to(&mut args);
        if let Some(rare) = rare {
            rare.write_to(&mut args);
        }
        for task in tasks {
            task.write_to(&mut args);
        }
        for link in links {
            link.write_to(&mut args);
        }
        args.extend(page.items.iter().map(|item| to_json(item).into_bytes()));
        let stats: Vec<(String, i64)> = page
            .stats
            .iter()
            .chain(extra.iter())
            .map(|(field, delta)| (field.into_owned(), delta))
            .collect();
        let bytes = args.iter().map(Vec::len).sum::<usize>()
            + stats.iter().map(|(f, _)| f.len() + 8).sum::<usize>();
        PageArgs {
            args,
            stats,
            bytes,
            lease_next,
            patience: Patience::Now,
            visit: false,
        }
    }

    /// Commits `pages` in one script call; `release` also puts work that
    /// came due back in the queue first. Returns each page's result, in
    /// order, with the leases that replace it. A page whose lease is lost
    /// makes the script write nothing and name it; the rest go again.
    pub(super) async fn commit_batch(
        &self,
        pages: &[PageArgs],
        release: bool,
    ) -> Result<Vec<(Committed, Vec<Leased>)>> {
        let mut lost = vec![false; pages.len()];
        loop {
            let sent: Vec<usize> = (0..pages.len()).filter(|&i| !lost[i]).collect();
            if sent.is_empty() {
                self.let_go(pages.len());
                return Ok(vec![(Committed::LeaseLost, Vec::new()); pages.len()]);
            }
            let reply = self.invoke_commit(pages, &sent, release).await?;
            let mut reply = reply.into_iter();
            let mut number = || {
                reply
                    .next()
                    .and_then(|v| redis::from_redis_value::<i64>(&v).ok())
                    .unwrap_or(-1)
            };
            let status = number();
            if status < 0 {
                let before = lost.iter().filter(|l| **l).count();
                while let Some(n) = usize::try_from(number()).ok().filter(|n| *n >= 1) {
                    if let Some(&i) = sent.get(n - 1) {
                        lost[i] = true;
                    }
                }
                if lost.iter().filter(|l| **l).count() == before {
                    // Cannot happen (the script names at least one page);
                    // never loop on it.
                    lost.iter_mut().for_each(|l| *l = true);
                }
                continue;
            }
            let mut done: Vec<(Committed, usize)> = vec![(Committed::LeaseLost, 0); pages.len()];
            for &i in &sent {
                let (enqueued, filtered) = (number(), number());
                done[i] = (
                    Committed::Done {
                        enqueued: enqueued.max(0) as u64,
                        filtered: filtered.max(0) as u64,
                    },
                    pages[i].lease_next,
                );
            }
            if status == fairness::HAND_BACK_REPLY {
                self.hand_back.ask();
            }
            // The new leases go to the pages that asked for them, in order.
            let leases = self.decode_leases(reply);
            self.let_go(pages.len());
            self.held.fetch_add(leases.len(), Ordering::Relaxed);
            let mut leases = leases.into_iter();
            return Ok(done
                .into_iter()
                .map(|(committed, asked)| (committed, leases.by_ref().take(asked).collect()))
                .collect());
        }
    }

    /// One call of the commit script for `pages[i]`, i in `sent`.
    async fn invoke_commit(
        &self,
        pages: &[PageArgs],
        sent: &[usize],
        release: bool,
    ) -> Result<Vec<redis::Value>> {
        let k = &self.keys;
        // The pages' stats, summed (in the order first counted).
        let mut stats: Vec<(&str, i64)> = Vec::new();
        for &i in sent {
            for (field, delta) in &pages[i].stats {
                match stats.iter_mut().find(|(f, _)| f == field) {
                    Some((_, sum)) => *sum += delta,
                    None => stats.push((field, *delta)),
                }
            }
        }
        let outboxes: Vec<usize> = self.shard.iter().flat_map(|p| p.others()).collect();
        let args = CommitArgs {
            worker: self.worker.clone(),
            wake: k.wake.clone(),
            lease_ms: ms(self.lease),
            interval_ms: ms(self.pacing.interval),
            jitter: flag(self.pacing.jitter),
            backoff_max_ms: ms(self.pacing.backoff_max),
            max_wait_ms: self.max_wait_ms().to_string(),
            dupe_spec: self.dupe_spec.clone(),
            handoffs: (self.handoffs.len() + outboxes.len()).to_string(),
            max_pages: self.quota.max_pages.to_string(),
            quota_shard: self.quota_shard(),
            max_per_host: self.quota.max_pages_per_host.to_string(),
            max_lease_expiries: self.max_lease_expiries.to_string(),
            release: flag(release),
            pages: sent.len().to_string(),
            stat_pairs: stats.len().to_string(),
            sink: self.sink.arg(),
            // A batch of visiting pages only; one with a page of the
            // worker's home (it moved here) renews its place in the crew.
            visit: flag(sent.iter().all(|&i| pages[i].visit)),
            // Besides the batch's pages, whose leases the commit ends.
            held: self
                .held
                .load(Ordering::Relaxed)
                .saturating_sub(pages.len())
                .to_string(),
        };
        let mut invocation = SCRIPTS.commit.call(k, self.sink.sink, args);
        for h in &self.handoffs {
            // A sharded spider's tasks wait in its hand-off outboxes.
            if self.shard.is_some() {
                invocation
                    .more_key(&k.handoff_outbox(&h.spider))
                    .record(HandoffRecord {
                        kind: "handoff".to_string(),
                        wake: String::new(),
                    });
            } else {
                invocation.more_key(&h.start_key).record(HandoffRecord {
                    kind: h.kind.as_str().to_string(),
                    wake: h.wake.clone(),
                });
            }
        }
        for to in outboxes {
            invocation.more_key(&k.outbox(to)).record(HandoffRecord {
                kind: "outbox".to_string(),
                wake: String::new(),
            });
        }
        // After every target's key, each start key's spider's waiting
        // workers' hash.
        if self.shard.is_none() {
            for h in &self.handoffs {
                invocation.more_key(&h.waiting);
            }
        }
        for (field, delta) in &stats {
            invocation.record(StatRecord {
                field: field.to_string(),
                delta: delta.to_string(),
            });
        }
        for &i in sent {
            invocation.values(&pages[i].args);
        }
        invocation
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(super::err("commit", &k.requests))
    }
}

/// A page's [`PageRecord`], with `links` and `tasks` following it, and
/// its [`PageRareRecord`] if it has anything to say there.
fn page_record(
    leased: &Leased,
    page: &PageResult,
    lease_next: usize,
    links: usize,
    tasks: usize,
) -> (PageRecord, Option<PageRareRecord>) {
    let (host_outcome, slow_ms) = match page.host {
        HostOutcome::None => ("", None),
        HostOutcome::Slow { wait } => ("slow", Some(wait.as_millis() as u64)),
        HostOutcome::Error => ("error", None),
        HostOutcome::Ok => ("ok", None),
    };
    let depth = page.requests.iter().map(|r| r.depth).max().unwrap_or(0);
    let rare = rare_record(page, slow_ms);
    let record = PageRecord {
        id: leased.id.clone(),
        n_links: links.to_string(),
        n_items: page.items.len().to_string(),
        n_tasks: tasks.to_string(),
        depth: depth.to_string(),
        host_outcome: host_outcome.to_string(),
        lease_next: lease_next.to_string(),
        host: leased
            .request
            .as_ref()
            .map(Request::host_key)
            .unwrap_or_default(),
        rare: flag(rare.is_some()),
    };
    (record, rare)
}

/// A page's [`PageRareRecord`]: its dead letter, failure, retry, slow
/// host's wait (`slow_ms`) and revisit, if it has any of them.
fn rare_record(page: &PageResult, slow_ms: Option<u64>) -> Option<PageRareRecord> {
    if page.dead.is_none()
        && page.failed.is_none()
        && page.retry.is_none()
        && slow_ms.is_none()
        && page.revisit.is_none()
    {
        return None;
    }
    let (retry_ms, retry_json, retry_priority) = match &page.retry {
        Some(r) => (
            r.delay.as_millis() as i64,
            encode(&r.request).unwrap_or_default(),
            clamped(r.request.priority),
        ),
        None => (-1, String::new(), 0),
    };
    let (revisit, revisit_fp, revisit_ms, revisit_json) = match &page.revisit {
        Some(Revisit::At { request, after }) => (
            "at",
            request.fingerprint(),
            after.as_millis() as u64,
            encode(request).unwrap_or_default(),
        ),
        Some(Revisit::Drop { request }) => ("drop", request.fingerprint(), 0, String::new()),
        None => ("", String::new(), 0, String::new()),
    };
    Some(PageRareRecord {
        dead: page.dead.as_ref().map(to_json).unwrap_or_default(),
        failed: page.failed.as_ref().map(to_json).unwrap_or_default(),
        retry_ms: retry_ms.to_string(),
        retry_json,
        retry_priority: retry_priority.to_string(),
        slow_ms: slow_ms.unwrap_or(0).to_string(),
        revisit: revisit.to_string(),
        revisit_fp,
        revisit_ms: revisit_ms.to_string(),
        revisit_json,
    })
}

/// Which of a page's links go to Redis ahead of its commit: with more
/// than [`MAX_LINKS`] links and handed links, all but the last
/// [`MAX_LINKS`] of those with a fingerprint (see `links_ahead.lua` for
/// why only those). The commit carries the rest.
#[derive(Debug, Default)]
pub(super) struct LinkSplit {
    /// How many links with a fingerprint, the first in page order.
    ahead: usize,
    /// Of those, how many were over the size bound (counted with the
    /// page's stats, in its commit).
    oversized: usize,
}

impl LinkSplit {
    fn of(page: &PageResult) -> LinkSplit {
        if page.requests.len() + page.tasks.len() <= MAX_LINKS {
            return LinkSplit::default();
        }
        let filtered = page.requests.iter().filter(|r| !r.dont_filter).count();
        LinkSplit {
            ahead: filtered.saturating_sub(MAX_LINKS),
            oversized: 0,
        }
    }

    /// The links the page's commit carries, in page order: all but the
    /// first [`LinkSplit::ahead`] with a fingerprint.
    fn left<'p>(&self, page: &'p PageResult) -> impl Iterator<Item = &'p Request> {
        let mut skipped = 0;
        let ahead = self.ahead;
        page.requests.iter().filter(move |r| {
            let sent = !r.dont_filter && skipped < ahead;
            skipped += usize::from(!r.dont_filter);
            !sent
        })
    }
}

/// What a page's links sent ahead of its commit queued and filtered.
#[derive(Debug, Default)]
struct Early {
    enqueued: u64,
    filtered: u64,
}

impl Early {
    /// The page's commit, counting its links sent ahead.
    fn add_to(self, (committed, leases): (Committed, Vec<Leased>)) -> (Committed, Vec<Leased>) {
        let committed = match committed {
            Committed::Done { enqueued, filtered } => Committed::Done {
                enqueued: enqueued + self.enqueued,
                filtered: filtered + self.filtered,
            },
            lost => lost,
        };
        (committed, leases)
    }
}

/// A request a page queues, unless it is over the size bound.
fn link_record(request: &Request) -> Option<LinkRecord> {
    Some(LinkRecord {
        fingerprint: fingerprint_arg(request),
        priority: clamped(request.priority).to_string(),
        json: encode(request)?,
    })
}

/// A link handed to another spider, unless its task is over the size
/// bound.
fn task_record(task: &Task) -> Option<TaskRecord> {
    let entry = task.entry();
    (entry.len() <= MAX_REQUEST_BYTES).then(|| TaskRecord {
        spider: (task.to + 1).to_string(),
        fingerprint: fingerprint_arg(&task.request),
        priority: clamped(task.request.priority).to_string(),
        entry,
        token: String::new(),
    })
}

/// A batch from its `first` page: the pages already waiting, and those
/// that come while every page in it may still wait (see the module docs).
async fn gather(
    frontier: &RedisFrontier,
    first: Pending,
    pending: &mut mpsc::UnboundedReceiver<Pending>,
    pace: &mut Pace,
) -> Vec<Pending> {
    let limit = frontier.commit_wait;
    let arrived = |pace: &mut Pace, p: &Pending| {
        pace.arrived(p.at.into_std(), limit);
        p.at + pace.wait(p.page.patience, limit)
    };
    let mut deadline = arrived(pace, &first);
    let mut bytes = first.page.bytes;
    let mut batch = vec![first];
    while batch.len() < MAX_PAGES && bytes < MAX_BYTES {
        let next = match pending.try_recv() {
            Ok(p) => p,
            Err(_) if deadline <= tokio::time::Instant::now() => break,
            Err(_) => match tokio::time::timeout_at(deadline, pending.recv()).await {
                Ok(Some(p)) => p,
                _ => break,
            },
        };
        deadline = deadline.min(arrived(pace, &next));
        bytes += next.page.bytes;
        batch.push(next);
    }
    batch
}

/// The commit task: sends the pages waiting as one batch, waits for Redis,
/// hands each page its result, and starts over.
async fn send_batches(frontier: RedisFrontier, mut pending: mpsc::UnboundedReceiver<Pending>) {
    let mut released = Instant::now();
    let mut pace = Pace::default();
    while let Some(first) = pending.recv().await {
        let batch = gather(&frontier, first, &mut pending, &mut pace).await;
        let release = released.elapsed() >= RELEASE_EVERY;
        let (pages, replies): (Vec<PageArgs>, Vec<_>) =
            batch.into_iter().map(|p| (p.page, p.reply)).unzip();
        let called = Instant::now();
        let done = crate::frontier::outage::until_done("commit pages", &frontier.fatal, || {
            frontier.commit_batch(&pages, release)
        })
        .await;
        pace.called(called.elapsed());
        if release {
            released = Instant::now();
        }
        for (reply, result) in replies.into_iter().zip(done) {
            // A page whose task is gone (aborted at shutdown) is committed
            // all the same; its replacement's lease expires unused.
            let _ = reply.send(result);
        }
    }
}
