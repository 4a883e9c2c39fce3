//! One spider over several shards (see `docs/scaling.md`): the contract
//! kept by N Redis frontiers, one per shard, each with its own keys and
//! hash tag. A request's home is the shard of its host
//! ([`crate::frontier::shards::shard_of`]), where it is queued, leased,
//! committed and deduplicated, all as an unsharded spider does, each step
//! one script call on that shard. What crosses shards goes through
//! outboxes (see [`super::outbox`]): a commit or a claim hands the
//! requests of other shards to its own shard's outboxes in its one script
//! call, then moves them to their shards before it returns, so they are
//! queued there as an unsharded commit's are. A mover per pair of shards
//! in every worker looks at the outboxes every second, for what a worker
//! killed between its commit and its move left behind.
//!
//! Each worker has a home shard, where its leases held ahead come from
//! and whose crew it is in; other shards only fill the download slots
//! its home leaves idle (see `lease_round`), so that the pages it
//! finishes together share one commit call.
//!
//! Lease ids carry their shard (`<shard>/<id>`), so commits, renewals and
//! hand-backs go to the shard that leased. Shard 0 holds what a crawl has
//! once: the start key, the login session, the heartbeats, the worker
//! stats; reading the crawl (status, stats, failures) sums or merges the
//! shards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use async_trait::async_trait;

use super::admin::{DupefilterInfo, HeldLeases};
use super::outbox::Delivered;
use super::{pickup, quota, wake, RedisFrontier, RedisTarget, Result, Visit};
use crate::frontier::outage::Fatal;
use crate::frontier::shards::{shard_of_host, ShardPlace};
use crate::frontier::{
    Backend, Claimed, Committed, DeadLetter, FailedRecord, Heartbeat, Keys, Leased, Options,
    PageResult, QueueStatus, RobotsRecord, SessionLock, SessionLogin, SessionRecord, StartClaim,
    Swept,
};
use crate::frontier::{HandBack, Patience};
use crate::stats::{Stat, Tally};

/// How often a mover looks at its outbox with nothing announced: for
/// entries whose committer died before moving them.
const MOVER_RECHECK: Duration = Duration::from_secs(1);

/// A worker's first home shard when shard 0 cannot hand it a ticket
/// (see [`RedisFrontier::home_ticket`]): one its id picks.
fn first_home(worker: &str, shards: usize) -> usize {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    worker.hash(&mut hasher);
    (hasher.finish() % shards.max(1) as u64) as usize
}

/// How many readings of the shards a status that finds nothing left
/// takes at most, while the shards keep queueing between two (see
/// `status`): after that the last one stands.
const DRAINED_READINGS: usize = 16;

/// A sharded spider's frontier, as one worker holds it.
pub struct ShardedFrontier {
    inner: Arc<Shards>,
}

struct Shards {
    /// Shard i's frontier at i.
    shards: Vec<RedisFrontier>,
    /// The worker's home shard ([`NO_HOME`] until its first lease takes a
    /// ticket): where its leases held ahead come from, the one shard
    /// whose crew it is in, and with shards that are nobody's home, the
    /// only one whose commits lease it replacements (see `lease_round`).
    home: AtomicUsize,
    /// The worker's download slots idle as of its last turn (see
    /// [`Backend::slots_idle`]): what it may lease from other shards.
    idle: AtomicUsize,
    /// Since when the worker's home has had nothing for it (none: it had
    /// work at its last lease).
    home_dry: std::sync::Mutex<Option<Instant>>,
}

/// How long a worker's home may have nothing for it before the worker
/// makes its home where it found work: a shard's queue runs empty for a
/// moment while its pages in flight find more.
const HOME_DRY: Duration = Duration::from_secs(1);
/// [`Shards::home`] before the worker's first lease.
const NO_HOME: usize = usize::MAX;

impl ShardedFrontier {
    /// Connects to `shards` shards of one spider on `target`; `keys(i)`
    /// gives shard i's keys (see [`crate::frontier::shards::shard_keys`]),
    /// `options` the rest. Starts the worker's movers.
    pub async fn connect(
        target: &RedisTarget,
        options: Options,
        shards: usize,
        keys: impl Fn(usize) -> Keys,
    ) -> Result<ShardedFrontier> {
        Ok(ShardedFrontier::new(
            ShardedFrontier::connect_each(target, options, shards, keys).await?,
        ))
    }

    /// Each shard's frontier, connected, for the caller to check before
    /// [`ShardedFrontier::new`].
    pub async fn connect_each(
        target: &RedisTarget,
        options: Options,
        shards: usize,
        keys: impl Fn(usize) -> Keys,
    ) -> Result<Vec<RedisFrontier>> {
        let mut frontiers = Vec::with_capacity(shards);
        for index in 0..shards {
            let options = Options {
                keys: keys(index),
                ..options.clone()
            };
            let shard = RedisFrontier::connect(target, options).await?;
            frontiers.push(shard.in_shard(ShardPlace {
                index,
                count: shards,
            }));
        }
        Ok(frontiers)
    }

    /// The frontier of the shards `frontiers` (shard i at i; see
    /// [`ShardedFrontier::connect_each`]); starts the worker's movers.
    pub fn new(mut frontiers: Vec<RedisFrontier>) -> ShardedFrontier {
        let fatal = Fatal::default();
        let hand_back = HandBack::default();
        for shard in &mut frontiers {
            shard.fatal = fatal.clone();
            shard.hand_back = hand_back.clone();
        }
        let inner = Arc::new(Shards {
            shards: frontiers,
            home: AtomicUsize::new(NO_HOME),
            idle: AtomicUsize::new(usize::MAX),
            home_dry: std::sync::Mutex::new(None),
        });
        let shards = inner.shards.len();
        for source in 0..shards {
            for to in (0..shards).filter(|&t| t != source) {
                tokio::spawn(mover(Arc::downgrade(&inner), source, to));
            }
            for h in 0..inner.shards[source].handoffs.len() {
                tokio::spawn(handoff_mover(Arc::downgrade(&inner), source, h));
            }
        }
        if inner.shards.first().is_some_and(|s| s.quota.max_pages > 0) {
            tokio::spawn(cap_keeper(Arc::downgrade(&inner)));
        }
        ShardedFrontier { inner }
    }

    /// Shard `index`'s frontier.
    pub fn shard(&self, index: usize) -> &RedisFrontier {
        &self.inner.shards[index]
    }

    /// Every shard's frontier, shard 0's first.
    pub fn shards(&self) -> &[RedisFrontier] {
        &self.inner.shards
    }

    /// Queues each seed (see [`RedisFrontier::seed`]) on its host's shard,
    /// once per crawl; returns how many were new.
    pub async fn seed(&self, seeds: &[crate::request::Request]) -> Result<u64> {
        let mut queued = 0;
        for (index, shard) in self.inner.shards.iter().enumerate() {
            let mine: Vec<crate::request::Request> = seeds
                .iter()
                .filter(|r| crate::frontier::shards::shard_of(&r.url, self.count()) == index)
                .cloned()
                .collect();
            if !mine.is_empty() {
                queued += shard.seed(&mine).await?;
            }
        }
        Ok(queued)
    }

    /// Converts entries of a scrapy-redis queue set aside on shard 0 (see
    /// [`RedisFrontier::import_scrapy_entries`]), and moves what it handed
    /// to its outboxes to their shards now; what a move cannot deliver now
    /// waits in the outbox for a mover.
    pub async fn import_scrapy_entries(
        &self,
        kind: super::takeover::ForeignQueue,
        entries: Vec<super::takeover::Import>,
    ) -> Result<super::takeover::Imported> {
        let imported = self.zero().import_scrapy_entries(kind, entries).await?;
        if imported.handed > 0 {
            self.move_now(0, 1..self.count()).await;
        }
        Ok(imported)
    }

    /// One reading of the shards in turn: their queues summed (see
    /// `status`), and each shard's request sequence, read before it.
    async fn read_status(&self) -> Result<(QueueStatus, Vec<u64>)> {
        let mut sequences = Vec::with_capacity(self.count());
        let (mut sum, mut pages): (Option<QueueStatus>, u64) = (None, 0);
        for shard in &self.inner.shards {
            sequences.push(shard.sequence().await?);
            let s = status_with_outboxes(shard).await?;
            if shard.quota.max_pages > 0 {
                pages += shard.stat(crate::stats::RESPONSE_RECEIVED_COUNT).await? + s.inflight;
            }
            match &mut sum {
                None => sum = Some(s),
                Some(sum) => add_status(sum, s),
            }
        }
        let mut sum = sum.unwrap_or_default();
        let flagged = sum.page_limit_reached;
        sum.page_limit_reached = self.zero().limit_reached(pages, flagged);
        Ok((sum, sequences))
    }

    /// The worker's home shard (see `lease_round`); the first call takes
    /// a ticket for it from shard 0, so that workers take the shards in
    /// turn. Its first lease asks, if nothing did before.
    pub async fn home_shard(&self) -> usize {
        self.home().await
    }

    async fn home(&self) -> usize {
        let n = self.count();
        let home = self.inner.home.load(Ordering::Relaxed);
        if home != NO_HOME {
            return home % n;
        }
        let home = match self.zero().home_ticket().await {
            Ok(ticket) => (ticket % n as u64) as usize,
            Err(e) => {
                let home = first_home(&self.zero().worker, n);
                tracing::warn!("cannot take a home shard's ticket ({e}); this worker's home is shard {home}, which its id picks");
                home
            }
        };
        // Another lease of this worker's may have taken one first.
        match self
            .inner
            .home
            .compare_exchange(NO_HOME, home, Ordering::Relaxed, Ordering::Relaxed)
        {
            Ok(_) => home,
            Err(taken) => taken % n,
        }
    }

    /// One lease over the shards, home first (see [`Backend::lease`]).
    ///
    /// A worker's pages stay on its home shard, so that the pages it
    /// finishes together are committed in one script call, not one per
    /// shard. Nearly all of a worker's leases are its commits'
    /// replacements, leased on the committed page's shard, so a worker
    /// whose first leases were spread over the shards kept that spread
    /// for the whole crawl, and each shard's commit call carried a third
    /// of its pages (BENCHMARKS.md, "One spider over three shards").
    /// So: its leases held ahead come from its home, where it is one of
    /// the crew; the other shards fill only slots that would otherwise
    /// idle, visited (see [`Visit`]), and their pages' commits lease no
    /// replacements while the shard is another worker's home (see
    /// `commit` and `commit.lua`). Leases held ahead from other shards
    /// would also take their work from the workers whose home it is,
    /// whose shares the visitor is not counted in. A home that has had
    /// nothing for the worker for [`HOME_DRY`] gives way to a shard that
    /// had work, which becomes its home. Start entries are peeked on
    /// shard 0, where they are claimed.
    async fn lease_round(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        let n = self.count();
        let home = self.home().await;
        let every = max == 0 && peek == 0;
        let idle = self.inner.idle.load(Ordering::Relaxed);
        let (mut leased, mut entries) = (Vec::new(), Vec::new());
        let (mut from_home, mut moved) = (0, None);
        for k in 0..n {
            let shard = (home + k) % n;
            let want = if k == 0 {
                max
            } else {
                idle.min(max).saturating_sub(leased.len())
            };
            let peek = if shard == 0 { peek } else { 0 };
            if want == 0 && peek == 0 && !every {
                continue;
            }
            let visit = match (k, from_home) {
                (0, _) => Visit::Home,
                (_, 0) => Visit::Waits,
                _ => Visit::Fills,
            };
            let (got, seen) = self.inner.shards[shard].lease_as(want, peek, visit).await?;
            if k == 0 {
                from_home = got.len();
            } else if from_home == 0 && moved.is_none() && !got.is_empty() {
                moved = Some(shard);
            }
            leased.extend(got.into_iter().map(|l| tagged(shard, l)));
            if shard == 0 {
                entries = seen;
            }
        }
        if max > 0 && self.home_stays_dry(from_home == 0) {
            if let Some(shard) = moved {
                self.inner.home.store(shard, Ordering::Relaxed);
                self.home_stays_dry(false);
            }
        }
        Ok((leased, entries))
    }

    /// Notes whether the worker's home had nothing for it now (`dry`);
    /// true once it has had nothing for [`HOME_DRY`].
    fn home_stays_dry(&self, dry: bool) -> bool {
        let Ok(mut since) = self.inner.home_dry.lock() else {
            return false;
        };
        match (dry, *since) {
            (false, _) => {
                *since = None;
                false
            }
            (true, None) => {
                *since = Some(Instant::now());
                false
            }
            (true, Some(t)) => t.elapsed() >= HOME_DRY,
        }
    }

    fn zero(&self) -> &RedisFrontier {
        &self.inner.shards[0]
    }

    fn count(&self) -> usize {
        self.inner.shards.len()
    }

    /// The shard of politeness key `host`.
    fn of_host(&self, host: &str) -> &RedisFrontier {
        &self.inner.shards[shard_of_host(host, self.count())]
    }

    /// Moves `source`'s outboxes for the shards `to` now, so that what a
    /// commit or claim handed on is queued on its shard when the call
    /// returns, as an unsharded frontier's is. A move that finds another
    /// mover at work leaves the outbox to it, and this worker's own mover
    /// looks again within [`MOVER_RECHECK`]. Returns what the deliveries
    /// queued and filtered (with what other commits had handed on, if
    /// they had not moved it yet). A move that fails (Redis unreachable)
    /// is said and left to the movers: the commit or claim is done, and
    /// what it handed on waits in the outbox.
    async fn move_now(&self, source: usize, to: impl IntoIterator<Item = usize>) -> Delivered {
        let shards = &self.inner.shards;
        let mut moved = Delivered::default();
        for to in to {
            match shards[source].move_outbox(to, &shards[to]).await {
                Ok(delivered) => moved.add(delivered),
                Err(e) => tracing::warn!(
                    outbox = %shards[source].keys.outbox(to),
                    "cannot move requests to shard {to} now ({e}); the outbox keeps them, and a mover tries again within {MOVER_RECHECK:?}"
                ),
            }
        }
        moved
    }

    /// Moves the tasks a commit on shard `source` handed to other spiders
    /// (`page`'s) on to their start keys at once: from `source`'s
    /// hand-off outboxes, and from those of the shards `routed` (the
    /// shards of its links' hosts, whose dupefilters decided them on
    /// delivery), so that the other spider's waiting workers get them
    /// now. A move that fails or finds another mover at work leaves them
    /// to the movers.
    async fn move_handoffs_now(&self, source: usize, routed: &BTreeSet<usize>, page: &PageResult) {
        let shards = &self.inner.shards;
        let mut spiders: Vec<usize> = page.tasks.iter().map(|t| t.to).collect();
        spiders.sort_unstable();
        spiders.dedup();
        for shard in std::iter::once(source).chain(routed.iter().copied()) {
            let from = &shards[shard];
            for h in spiders.iter().filter_map(|&i| from.handoffs.get(i)) {
                if let Err(e) = from.move_handoffs(h).await {
                    tracing::warn!(
                        outbox = %from.keys.handoff_outbox(&h.spider),
                        "cannot hand tasks to spider {} now ({e}); the outbox keeps them, and a mover tries again within {MOVER_RECHECK:?}",
                        h.spider
                    );
                }
            }
        }
    }
}

/// The queues, the stats hash and who holds leases, read from each of a
/// spider's shards (one for a spider that is not sharded) and summed.
pub struct CrawlReading {
    pub status: QueueStatus,
    pub stats: Vec<(String, String)>,
    /// Worker id → its leases over the shards.
    pub leases: BTreeMap<String, HeldLeases>,
}

/// Shard `shard`'s queues, with what waits in its outboxes counted as
/// queued, and as `outboxed` (on its way whatever the page limit says).
async fn status_with_outboxes(shard: &RedisFrontier) -> Result<QueueStatus> {
    let mut status = RedisFrontier::status(shard).await?;
    status.outboxed = shard.outboxes_len().await?;
    status.queued += status.outboxed;
    Ok(status)
}

/// Reads a [`CrawlReading`] (for `stats`, `stats --watch` and the
/// dashboard).
pub async fn read_crawl(shards: &[RedisFrontier]) -> Result<CrawlReading> {
    let (mut statuses, mut hashes) = (Vec::new(), Vec::new());
    let mut leases: BTreeMap<String, HeldLeases> = BTreeMap::new();
    for shard in shards {
        statuses.push(status_with_outboxes(shard).await?);
        hashes.push(shard.stats().await?);
        for held in shard.leases().await? {
            let sum = leases.entry(held.worker.clone()).or_insert(HeldLeases {
                count: 0,
                ..held.clone()
            });
            sum.count += held.count;
            sum.expire_within = sum.expire_within.max(held.expire_within);
        }
    }
    let mut status = sum_status(statuses);
    let stats = merge_stats(hashes);
    if let Some(zero) = shards.first().filter(|_| shards.len() > 1) {
        let responses = stats
            .iter()
            .find(|(name, _)| name == crate::stats::RESPONSE_RECEIVED_COUNT.name)
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or(0);
        let flagged = status.page_limit_reached;
        status.page_limit_reached = zero.limit_reached(responses + status.inflight, flagged);
    }
    Ok(CrawlReading {
        status,
        stats,
        leases,
    })
}

/// One mover: moves shard `source`'s outbox for shard `to` every
/// [`MOVER_RECHECK`], for what a worker that died after its commit left
/// there (commits and claims move what they hand on themselves); ends
/// with the frontier.
async fn mover(shards: Weak<Shards>, source: usize, to: usize) {
    loop {
        tokio::time::sleep(MOVER_RECHECK).await;
        let Some(s) = shards.upgrade() else { return };
        let from = &s.shards[source];
        // Outboxes are empty nearly always (commits move what they hand
        // on): a plain LLEN first spares Redis a script call per mover.
        let moved = match from.outbox_len(to).await {
            Ok(0) => Ok(Default::default()),
            Ok(_) => from.move_outbox(to, &s.shards[to]).await,
            Err(e) => Err(e),
        };
        if let Err(e) = moved {
            tracing::warn!(
                outbox = %from.keys.outbox(to),
                "cannot move requests to shard {to} ({e}); trying again in {MOVER_RECHECK:?}"
            );
        }
    }
}

/// The shards other than `place`'s that `requests` belong to, each once.
fn shards_elsewhere<'r>(
    place: ShardPlace,
    requests: impl Iterator<Item = &'r crate::request::Request>,
) -> BTreeSet<usize> {
    requests.filter_map(|r| place.elsewhere(r)).collect()
}

/// A reading of a crawl read in several steps (`read`: its status, and
/// marks that move whenever work moves between the steps' slots): one that
/// finds it drained is taken again, up to [`DRAINED_READINGS`] times, and
/// stands only when the marks did not move between the two, so that
/// nothing was left at the instant between them (see
/// `ShardedFrontier::status`). Without marks, the first reading stands.
pub(super) async fn settled_reading<F, R>(read: F) -> Result<QueueStatus>
where
    F: Fn() -> R,
    R: std::future::Future<Output = Result<(QueueStatus, Vec<u64>)>>,
{
    let (mut status, mut marks) = read().await?;
    for _ in 0..DRAINED_READINGS {
        if marks.is_empty() || !status.drained() {
            break;
        }
        let (again, moved) = read().await?;
        let settled = moved == marks;
        (status, marks) = (again, moved);
        if settled {
            break;
        }
    }
    Ok(status)
}

/// One hand-off mover: moves shard `source`'s hand-off outbox for its
/// spider's `handoff`th `to_spider` every [`MOVER_RECHECK`], for what a
/// worker that died after its commit left there; ends with the frontier.
async fn handoff_mover(shards: Weak<Shards>, source: usize, handoff: usize) {
    loop {
        tokio::time::sleep(MOVER_RECHECK).await;
        let Some(s) = shards.upgrade() else { return };
        let from = &s.shards[source];
        let Some(h) = from.handoffs.get(handoff) else {
            return;
        };
        let moved = match from.handoff_outbox_len(h).await {
            Ok(0) => Ok(0),
            Ok(_) => from.move_handoffs(h).await,
            Err(e) => Err(e),
        };
        if let Err(e) = moved {
            tracing::warn!(
                outbox = %from.keys.handoff_outbox(&h.spider),
                "cannot hand tasks to spider {} ({e}); trying again in {MOVER_RECHECK:?}",
                h.spider
            );
        }
    }
}

/// Keeps a sharded spider's `max_pages` caps where the work is (see
/// [`super::quota`]): every [`quota::KEEPER_EVERY`], finishes the moves a
/// dead mover left, then moves what shards cannot use to shards that
/// have more queued than their caps leave them.
async fn cap_keeper(shards: Weak<Shards>) {
    loop {
        tokio::time::sleep(quota::KEEPER_EVERY).await;
        let Some(s) = shards.upgrade() else { return };
        if let Err(e) = keep_caps(&s.shards).await {
            tracing::warn!(
                "cannot move the shards' caps of max_pages now ({e}); each shard leases under its own meanwhile, and this worker tries again in {:?}",
                quota::KEEPER_EVERY
            );
        }
    }
}

/// One look of [`cap_keeper`] at the shards' caps (also taken by a lease
/// that came back short); returns how much of the limit it moved.
async fn keep_caps(shards: &[RedisFrontier]) -> Result<i64> {
    let mut readings = Vec::with_capacity(shards.len());
    for shard in shards {
        readings.push(shard.cap_reading().await?);
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let late = quota::UNFINISHED_AFTER.as_millis() as u64;
    for (from, reading) in readings.iter().enumerate() {
        for (to, token, amount, when) in &reading.unfinished {
            if *to < shards.len() && now.saturating_sub(*when) >= late {
                shards[*to].take_cap(token, *amount).await?;
                shards[from].finish_cap_move(*to, token).await?;
            }
        }
    }
    let mut moved = 0;
    for m in quota::plan_moves(&readings) {
        let (token, given) = shards[m.from].give_cap(m.to, m.amount).await?;
        if given > 0 {
            shards[m.to].take_cap(&token, given).await?;
            shards[m.from].finish_cap_move(m.to, &token).await?;
            moved += given;
        }
    }
    Ok(moved)
}

/// `id` as the sharded frontier gives it out: with its shard.
fn tagged(shard: usize, mut leased: Leased) -> Leased {
    leased.id = format!("{shard}/{}", leased.id);
    leased
}

/// The shard and the shard's own id of an id given out by [`tagged`].
fn untagged(id: &str) -> Option<(usize, &str)> {
    let (shard, id) = id.split_once('/')?;
    Some((shard.parse().ok()?, id))
}

/// `ids` by the shard they came from, as the shards know them.
fn by_shard(ids: &[String], shards: usize) -> Vec<Vec<String>> {
    let mut out = vec![Vec::new(); shards];
    for (shard, id) in ids.iter().filter_map(|id| untagged(id)) {
        if let Some(list) = out.get_mut(shard) {
            list.push(id.to_string());
        }
    }
    out
}

/// The crawl's stats from each shard's: counters summed, the earliest
/// start, the latest finish and the deepest request kept.
pub fn merge_stats(shards: Vec<Vec<(String, String)>>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (field, value) in shards.into_iter().flatten() {
        let Some(i) = out.iter().position(|(f, _)| *f == field) else {
            out.push((field, value));
            continue;
        };
        let old = &out[i].1;
        let merged = match field.as_str() {
            "start_time" => old.clone().min(value),
            "finish_time" | "finish_reason" => old.clone().max(value),
            f if f.ends_with("_max") || f.starts_with("elapsed_time") => {
                match (old.parse::<f64>(), value.parse::<f64>()) {
                    (Ok(a), Ok(b)) if b > a => value,
                    _ => old.clone(),
                }
            }
            _ => match (old.parse::<i64>(), value.parse::<i64>()) {
                (Ok(a), Ok(b)) => (a + b).to_string(),
                _ => old.clone(),
            },
        };
        out[i].1 = merged;
    }
    out
}

/// The `n` newest of the shards' `records` by their `time`, oldest first.
pub fn newest<T>(mut records: Vec<T>, n: usize, time: impl Fn(&T) -> f64) -> Vec<T> {
    records.sort_by(|a, b| time(a).total_cmp(&time(b)));
    let from = records.len().saturating_sub(n);
    records.split_off(from)
}

/// The crawl's queues from each shard's (shard 0's first: its upstreams
/// are the crawl's).
pub fn sum_status(shards: Vec<QueueStatus>) -> QueueStatus {
    let mut shards = shards.into_iter();
    let mut sum = shards.next().unwrap_or_default();
    for s in shards {
        add_status(&mut sum, s);
    }
    sum
}

/// The crawl's dupefilter from each shard's: entries, bytes and capacity
/// summed, shard 0's mode.
pub fn sum_dupefilters(shards: Vec<DupefilterInfo>) -> DupefilterInfo {
    let mut shards = shards.into_iter();
    let mut sum = shards.next().unwrap_or_default();
    for d in shards {
        sum.entries += d.entries;
        sum.bytes += d.bytes;
        sum.capacity += d.capacity;
        sum.filters = sum.filters.max(d.filters);
        sum.newest_entries += d.newest_entries;
    }
    sum
}

fn add_status(sum: &mut QueueStatus, s: QueueStatus) {
    sum.start += s.start;
    sum.queued += s.queued;
    sum.outboxed += s.outboxed;
    sum.inflight += s.inflight;
    sum.dead += s.dead;
    sum.failed += s.failed;
    sum.dupefilter += s.dupefilter;
    sum.items += s.items;
    sum.delayed += s.delayed;
    sum.scheduled += s.scheduled;
    sum.overdue += s.overdue;
    sum.paused |= s.paused;
    sum.page_limit_reached |= s.page_limit_reached;
    sum.items_backlog_full |= s.items_backlog_full;
}

fn add_swept(sum: &mut Swept, s: Swept) {
    sum.crew = sum.crew.max(s.crew);
    sum.slots += s.slots;
    sum.backoffs += s.backoffs;
    sum.robots += s.robots;
    sum.locks += s.locks;
    sum.workers += s.workers;
    sum.upstreams += s.upstreams;
}

#[async_trait]
impl Backend for ShardedFrontier {
    fn keys(&self) -> &Keys {
        &self.zero().keys
    }

    fn worker(&self) -> &str {
        self.zero().worker()
    }

    fn items_key(&self) -> &str {
        self.zero().items_key()
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn fatal(&self) -> Fatal {
        self.zero().fatal.clone()
    }

    fn wake(&self) -> wake::Wake {
        Backend::wake(self.zero())
    }

    async fn watch_start(&self, recheck: Duration) -> pickup::StartWatch {
        Backend::watch_start(self.zero(), recheck).await
    }

    /// Leases from the shards in turn, starting with the next one each
    /// time (start entries are peeked on shard 0, where they are
    /// claimed), until `max` are leased. A lease of nothing (`max` 0, no
    /// peek), which a caller makes to put the work that came due back in
    /// the queue, asks every shard.
    async fn lease(&self, max: usize, peek: usize) -> Result<(Vec<Leased>, Vec<String>)> {
        let (mut leased, entries) = self.lease_round(max, peek).await?;
        // Short under `max_pages`: the caps may be where the work is not.
        // What was leased is returned whatever this finds (a lease lost
        // here would wait out its expiry).
        if leased.len() < max && self.zero().quota.max_pages > 0 {
            let more = match keep_caps(&self.inner.shards).await {
                Ok(0) => Ok((Vec::new(), Vec::new())),
                Ok(_) => self.lease_round(max - leased.len(), 0).await,
                Err(e) => Err(e),
            };
            match more {
                Ok((more, _)) => leased.extend(more),
                Err(e) => tracing::warn!(
                    "cannot move the shards' caps of max_pages for this lease ({e}); it takes what the caps allowed, and the keeper tries again within {:?}",
                    quota::KEEPER_EVERY
                ),
            }
        }
        Ok((leased, entries))
    }

    /// The leases handed to this worker by any shard's commits: they come
    /// on shard 0's wake channel, each message naming its shard's queue.
    fn take_handed(&self) -> Vec<Leased> {
        let shards = &self.inner.shards;
        self.zero()
            .handed_messages()
            .into_iter()
            .filter_map(|h| {
                let shard = shards.iter().position(|s| s.keys.requests == h.queue)?;
                Some((shard, shards[shard].adopt(h.fields)))
            })
            .flat_map(|(shard, leased)| leased.into_iter().map(move |l| tagged(shard, l)))
            .collect()
    }

    fn in_flight_seen(&self) -> Option<u64> {
        self.inner.shards.iter().map(Backend::in_flight_seen).sum()
    }

    /// The shards' one signal (see [`ShardedFrontier::new`]).
    fn hand_back(&self) -> HandBack {
        self.zero().hand_back.clone()
    }

    fn slots_idle(&self, idle: usize) {
        self.inner.idle.store(idle, Ordering::Relaxed);
    }

    fn lease_due_only(&self, due_only: bool) {
        for shard in &self.inner.shards {
            Backend::lease_due_only(shard, due_only);
        }
    }

    fn next_due_in(&self) -> Option<Duration> {
        self.inner
            .shards
            .iter()
            .filter_map(|s| s.next_due_in())
            .min()
    }

    async fn commit(
        &self,
        leased: &Leased,
        page: &PageResult,
        lease_next: usize,
        patience: Patience,
    ) -> Result<(Committed, Vec<Leased>)> {
        let Some((shard, id)) = untagged(&leased.id) else {
            return Ok((Committed::LeaseLost, Vec::new()));
        };
        let own = Leased {
            id: id.to_string(),
            ..leased.clone()
        };
        let frontier = &self.inner.shards[shard];
        // A visit's replacements come from home (see `lease_round`): its
        // slot goes back to the turn loop, which leases at home first,
        // unless no worker has this shard for home.
        let visit = shard != self.home().await;
        let (committed, next) = frontier
            .commit_as(&own, page, lease_next, patience, visit)
            .await?;
        let place = ShardPlace {
            index: shard,
            count: self.count(),
        };
        let committed = match committed {
            Committed::Done { enqueued, filtered } => {
                // The shards its links went to, and those its tasks did
                // (each decided by its host's shard).
                let routed = shards_elsewhere(place, page.tasks.iter().map(|t| &t.request));
                let handed = shards_elsewhere(place, page.requests.iter());
                let moved = self.move_now(shard, handed.union(&routed).copied()).await;
                if !page.tasks.is_empty() {
                    self.move_handoffs_now(shard, &routed, page).await;
                }
                Committed::Done {
                    enqueued: enqueued + moved.enqueued,
                    filtered: filtered + moved.filtered,
                }
            }
            lost => lost,
        };
        Ok((
            committed,
            next.into_iter().map(|l| tagged(shard, l)).collect(),
        ))
    }

    async fn renew(&self, ids: &[String]) -> Result<Vec<String>> {
        let mut lost = Vec::new();
        for (shard, ids) in by_shard(ids, self.count()).into_iter().enumerate() {
            if !ids.is_empty() {
                let gone = self.inner.shards[shard].renew(&ids).await?;
                lost.extend(gone.into_iter().map(|id| format!("{shard}/{id}")));
            }
        }
        Ok(lost)
    }

    async fn release(&self, ids: &[String]) -> Result<u64> {
        let mut released = 0;
        for (shard, ids) in by_shard(ids, self.count()).into_iter().enumerate() {
            if !ids.is_empty() {
                released += self.inner.shards[shard].release(&ids).await?;
            }
        }
        Ok(released)
    }

    async fn claim_start(&self, claims: &[StartClaim]) -> Result<Claimed> {
        let mut claimed = self.zero().claim_start(claims).await?;
        if claimed.claimed > claimed.enqueued + claimed.filtered + claimed.dead {
            let moved = self.move_now(0, 1..self.count()).await;
            claimed.enqueued += moved.enqueued;
            claimed.filtered += moved.filtered;
        }
        Ok(claimed)
    }

    /// The shards' queues summed, with what waits in their outboxes as
    /// queued. The shards are read one after the other while hand-offs
    /// move work between them: a page committed on one after it was read
    /// may queue links on another read before, so a reading that finds
    /// nothing left is taken again, and stands only when no shard queued
    /// anything between the two (each shard's request sequence, which
    /// every queueing step draws from, unchanged). Nothing was left then
    /// at the instant between the two readings.
    async fn status(&self) -> Result<QueueStatus> {
        settled_reading(|| self.read_status()).await
    }

    async fn reserve_slot(
        &self,
        host: &str,
        spacing: Duration,
        hold: Duration,
        limit: Option<Duration>,
    ) -> Result<Option<Duration>> {
        self.of_host(host)
            .reserve_slot(host, spacing, hold, limit)
            .await
    }

    async fn hosts_backed_off(&self) -> Result<u64> {
        let mut sum = 0;
        for shard in &self.inner.shards {
            sum += shard.hosts_backed_off().await?;
        }
        Ok(sum)
    }

    async fn robots_cached(&self, host: &str) -> Result<Option<RobotsRecord>> {
        self.of_host(host).robots_cached(host).await
    }

    async fn robots_store(
        &self,
        host: &str,
        record: &RobotsRecord,
        crawl_delay: Duration,
        ttl: Duration,
    ) -> Result<()> {
        self.of_host(host)
            .robots_store(host, record, crawl_delay, ttl)
            .await
    }

    async fn robots_lock(&self, host: &str, ttl: Duration) -> Result<bool> {
        self.of_host(host).robots_lock(host, ttl).await
    }

    async fn sweep(&self, budget: usize, robots_ttl: Duration) -> Result<Swept> {
        let mut sum = Swept::default();
        for shard in &self.inner.shards {
            add_swept(&mut sum, shard.sweep(budget, robots_ttl).await?);
        }
        Ok(sum)
    }

    async fn grow_dupefilter(&self) -> Result<()> {
        for shard in &self.inner.shards {
            Backend::grow_dupefilter(shard).await?;
        }
        Ok(())
    }

    async fn session(&self) -> Result<SessionRecord> {
        Backend::session(self.zero()).await
    }

    async fn session_lock(&self, seen: u64, holder: &str, ttl: Duration) -> Result<SessionLock> {
        Backend::session_lock(self.zero(), seen, holder, ttl).await
    }

    async fn session_store(&self, holder: &str, login: &SessionLogin) -> Result<bool> {
        Backend::session_store(self.zero(), holder, login).await
    }

    async fn session_stale(&self, generation: u64) -> Result<bool> {
        Backend::session_stale(self.zero(), generation).await
    }

    async fn add_stats(&self, tally: &Tally, start_time: Option<&str>) -> Result<()> {
        self.zero().add_stats(tally, start_time).await
    }

    async fn record_finish(&self, reason: &str) -> Result<()> {
        self.zero().record_finish(reason).await
    }

    async fn stat(&self, stat: Stat) -> Result<u64> {
        let mut sum = 0;
        for shard in &self.inner.shards {
            sum += shard.stat(stat).await?;
        }
        Ok(sum)
    }

    async fn stats(&self) -> Result<Vec<(String, String)>> {
        let mut each = Vec::new();
        for shard in &self.inner.shards {
            each.push(shard.stats().await?);
        }
        Ok(merge_stats(each))
    }

    /// The `n` most recent failures of all shards, oldest first.
    async fn failures(&self, n: usize) -> Result<Vec<FailedRecord>> {
        let mut all = Vec::new();
        for shard in &self.inner.shards {
            all.extend(Backend::failures(shard, n).await?);
        }
        Ok(newest(all, n, |r| r.time))
    }

    /// The `n` most recent dead letters of all shards, oldest first.
    async fn dead_letters(&self, n: usize) -> Result<Vec<DeadLetter>> {
        let mut all = Vec::new();
        for shard in &self.inner.shards {
            all.extend(Backend::dead_letters(shard, n).await?);
        }
        Ok(newest(all, n, |r| r.time))
    }

    async fn push_start(&self, entries: &[String]) -> Result<u64> {
        Backend::push_start(self.zero(), entries).await
    }

    /// Pauses every shard (each shard's leases read its own control).
    async fn pause(&self) -> Result<bool> {
        let mut paused = false;
        for shard in &self.inner.shards {
            paused |= shard.pause().await?;
        }
        Ok(paused)
    }

    async fn resume(&self) -> Result<bool> {
        let mut resumed = false;
        for shard in &self.inner.shards {
            resumed |= shard.resume().await?;
        }
        Ok(resumed)
    }

    async fn paused(&self) -> Result<bool> {
        self.zero().paused().await
    }

    async fn heartbeat(&self, beat: &Heartbeat) -> Result<()> {
        self.zero().heartbeat(beat).await
    }

    /// Leaves every shard's workers waiting for work.
    async fn stop_waiting(&self) -> Result<()> {
        for shard in &self.inner.shards {
            shard.stop_waiting().await?;
        }
        Ok(())
    }

    /// Leaves every shard's crew (and shard 0's heartbeats).
    async fn unregister(&self) -> Result<()> {
        for shard in &self.inner.shards {
            shard.unregister().await?;
        }
        Ok(())
    }

    async fn workers(&self) -> Result<Vec<(String, Heartbeat)>> {
        self.zero().workers().await
    }
}
