//! The exporter's loop, the same for every store: take a batch of items
//! from Redis (a list moved to the exporter's own list, or a consumer
//! group's entries), find each item's table, write the batch to the
//! store, then acknowledge it in Redis, with the dead letters of what the
//! store refused, in one step. Nothing is acknowledged before the store
//! has committed it, and the stores upsert by key, so an exporter killed
//! at any point leaves its batch to be taken over and written again
//! harmlessly.
//!
//! Around the loop: a heartbeat task renews the exporter's lease (and,
//! for a stream, keeps the entries it holds from being claimed); gone
//! exporters' items are taken back; a store that is down is waited for,
//! the batch held; the first SIGTERM or Ctrl-C lets the batch in flight
//! finish; `--until-drained` stops once the crawl is drained and every
//! item is acknowledged; temporary files of gone exporters are removed
//! (`super::stale`); with metrics, the counts and the store's reachability
//! are set here, the backlog by `super::watch`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::schema::{Row, Schema};
use super::sinks::{Sink, SinkError};
use super::watch::Gauges;
use crate::frontier::redis::export::{Ack, Acked, Delivered, Taken};
use crate::frontier::{ExportDeadLetter, FrontierError, ItemSink, RedisFrontier};
use crate::metrics::export::ExportSeries;

/// How the exporter runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// The stream's consumer group.
    pub group: String,
    /// Items taken in one step.
    pub batch: usize,
    /// An exporter silent this long is gone: its items are taken back
    /// (list) or claimed (stream).
    pub claim_after: Duration,
    /// Stop once the crawl is drained and everything is exported.
    pub until_drained: bool,
    /// Create or extend tables.
    pub create: bool,
    /// How long an idle exporter waits before it looks for items again.
    pub idle_wait: Duration,
}

/// Why the exporter stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The store needs a person (see [`SinkError::Fatal`]).
    #[error("{0}")]
    Store(String),
    /// Redis refused a step for a reason other than being down.
    #[error(transparent)]
    Redis(#[from] FrontierError),
}

/// What an exporter did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub exported: u64,
    pub refused: u64,
}

/// Why [`Exporter::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// The crawl is drained and everything exported (`--until-drained`).
    Drained,
    /// SIGTERM or Ctrl-C.
    Signal,
}

/// One exporter process's state.
pub struct Exporter {
    /// Its id: its consumer name and its lease's field.
    pub id: String,
    /// The spider's shards (one for a spider that is not sharded).
    shards: Vec<RedisFrontier>,
    schema: Schema,
    sink: Box<dyn Sink>,
    /// The store, for dead letters and messages.
    store: String,
    options: Options,
    /// Per shard, what a sink that holds rows has written and not
    /// acknowledged yet.
    held: Vec<Vec<Ack>>,
    /// Per shard, the stream ids of the batch in flight and those held:
    /// the heartbeat keeps them from being claimed.
    in_hand: Arc<Mutex<Vec<Vec<String>>>>,
    /// Per shard: the next take registers the exporter anew (its first,
    /// or its first after it was found gone).
    fresh: Vec<bool>,
    stop: watch::Receiver<bool>,
    pub tally: Tally,
    last_reclaim: Option<Instant>,
    last_claim: Option<Instant>,
    last_report: Instant,
    /// The metrics' series, when the exporter serves them.
    series: Option<ExportSeries>,
    /// The backlog gauges' reader, started by [`Exporter::run`].
    gauges: Option<Gauges>,
    /// Whether the store answered the last write or check.
    store_up: Option<bool>,
    last_check: Option<Instant>,
}

/// The wait after a Redis outage or a store that is down, doubled each
/// time up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(5);
/// How often progress is logged.
const REPORT_EVERY: Duration = Duration::from_secs(10);
/// A gone exporter's lease is forgotten after this.
const FORGET_AFTER: Duration = Duration::from_secs(3600);
/// How often an idle exporter serving metrics checks that its store
/// answers.
const CHECK_EVERY: Duration = Duration::from_secs(5);

impl Exporter {
    pub fn new(
        id: String,
        shards: Vec<RedisFrontier>,
        schema: Schema,
        sink: Box<dyn Sink>,
        store: String,
        options: Options,
        stop: watch::Receiver<bool>,
    ) -> Exporter {
        let n = shards.len();
        Exporter {
            id,
            shards,
            schema,
            sink,
            store,
            options,
            held: vec![Vec::new(); n],
            in_hand: Arc::new(Mutex::new(vec![Vec::new(); n])),
            fresh: vec![true; n],
            stop,
            tally: Tally::default(),
            last_reclaim: None,
            last_claim: None,
            last_report: Instant::now(),
            series: None,
            gauges: None,
            store_up: None,
            last_check: None,
        }
    }

    /// Counts into `gauges`' series and reads the backlog into them while
    /// it runs.
    pub fn with_metrics(mut self, gauges: Gauges) -> Exporter {
        self.series = Some(gauges.series.clone());
        self.gauges = Some(gauges);
        self
    }

    fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    fn stream(&self) -> bool {
        self.shards[0].sink() == ItemSink::Stream
    }

    /// Exports until stopped, or until drained with `--until-drained`.
    pub async fn run(&mut self) -> Result<Stopped, ExportError> {
        let gauges = self
            .gauges
            .take()
            .map(|g| g.spawn(self.shards.clone(), self.options.group.clone()));
        let stopped = self.start_and_run().await;
        if let Some(g) = gauges {
            g.abort();
        }
        stopped
    }

    async fn start_and_run(&mut self) -> Result<Stopped, ExportError> {
        if !self.open_store().await? {
            return Ok(Stopped::Signal);
        }
        self.finish_renames().await?;
        self.sweep().await;
        if self.stream() {
            for i in 0..self.shards.len() {
                let group = self.options.group.clone();
                let frontier = self.shards[i].clone();
                let made = self
                    .redis("create the consumer group", || {
                        frontier.export_group(&group)
                    })
                    .await?;
                if made.is_none() {
                    return Ok(Stopped::Signal);
                }
            }
        }
        let beat = self.heartbeat();
        let stopped = self.export_loop().await;
        beat.abort();
        let sealed = self.seal_and_ack().await;
        self.leave().await;
        sealed?;
        stopped
    }

    async fn export_loop(&mut self) -> Result<Stopped, ExportError> {
        loop {
            if self.stopping() {
                return Ok(Stopped::Signal);
            }
            let mut got = 0;
            for shard in 0..self.shards.len() {
                got += self.round(shard).await?;
            }
            if self.sink.holds() && self.sink.seal_due() {
                self.seal_and_ack().await?;
            }
            self.report(false).await;
            if got > 0 {
                continue;
            }
            self.check_store().await;
            self.reclaim(false).await?;
            if self.options.until_drained && self.drained().await? {
                return Ok(Stopped::Drained);
            }
            let mut stop = self.stop.clone();
            tokio::select! {
                _ = tokio::time::sleep(self.options.idle_wait) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// Connects to the store and checks its tables, waiting while it is
    /// down; false when stopped meanwhile.
    async fn open_store(&mut self) -> Result<bool, ExportError> {
        let mut wait = FIRST_WAIT;
        loop {
            match self.sink.open(&self.schema, self.options.create).await {
                Ok(()) => {
                    self.store_is(true);
                    return Ok(true);
                }
                Err(SinkError::Fatal(m)) => return Err(ExportError::Store(m)),
                Err(SinkError::Unavailable(m)) => {
                    self.store_is(false);
                    tracing::error!("{m}; waiting for it, trying again in {wait:?}");
                }
            }
            if !self.pause(&mut wait).await {
                return Ok(false);
            }
        }
    }

    /// Waits `wait` (then doubles it, up to [`MAX_WAIT`]); false when
    /// stopped meanwhile.
    async fn pause(&self, wait: &mut Duration) -> bool {
        let mut stop = self.stop.clone();
        if *stop.borrow() {
            return false;
        }
        tokio::select! {
            _ = tokio::time::sleep(*wait) => {}
            _ = stop.changed() => return false,
        }
        *wait = (*wait * 2).min(MAX_WAIT);
        true
    }

    /// Runs a Redis step, waiting out outages; `Ok(None)` when stopped
    /// meanwhile.
    async fn redis<T, F, Fut>(&self, what: &str, step: F) -> Result<Option<T>, ExportError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, FrontierError>>,
    {
        let mut wait = FIRST_WAIT;
        loop {
            match step().await {
                Ok(v) => return Ok(Some(v)),
                Err(e) if e.is_outage() => {
                    tracing::warn!("cannot {what}: {e}; trying again in {wait:?}");
                }
                Err(e) => return Err(e.into()),
            }
            if !self.pause(&mut wait).await {
                return Ok(None);
            }
        }
    }

    /// One batch of one shard: taken, written, acknowledged (or held).
    /// How many items it had.
    async fn round(&mut self, shard: usize) -> Result<usize, ExportError> {
        let Some(taken) = self.take(shard).await? else {
            return Ok(0);
        };
        let delivered = match taken {
            Taken::Items(items) => items,
            Taken::Lost => {
                self.lost(shard).await;
                return Ok(0);
            }
        };
        if delivered.is_empty() {
            return Ok(0);
        }
        let ids: Vec<String> = delivered.iter().filter_map(|d| d.id.clone()).collect();
        self.hold_ids(shard, &ids, true);
        let Some(acks) = self.write(&delivered).await? else {
            // Stopped while the store was down: nothing acknowledged, the
            // batch goes to another exporter.
            return Ok(0);
        };
        if self.sink.holds() {
            self.held[shard].extend(acks);
        } else {
            self.ack(shard, acks, Vec::new(), false).await?;
            self.hold_ids(shard, &ids, false);
        }
        Ok(delivered.len())
    }

    /// The next batch of `shard`: `None` when stopped (or Redis is down).
    async fn take(&mut self, shard: usize) -> Result<Option<Taken>, ExportError> {
        let frontier = self.shards[shard].clone();
        let (id, batch, lease) = (
            self.id.clone(),
            self.options.batch,
            self.options.claim_after,
        );
        if !self.stream() {
            let fresh = self.fresh[shard];
            let taken = self
                .redis("take items", || {
                    frontier.export_take(&id, lease, batch, fresh)
                })
                .await?;
            if taken.is_some() {
                self.fresh[shard] = false;
            }
            return Ok(taken);
        }
        let group = self.options.group.clone();
        let claim_due = self
            .last_claim
            .is_none_or(|t| t.elapsed() >= self.options.claim_after / 4);
        if claim_due {
            self.last_claim = Some(Instant::now());
            let claimed = self
                .redis("claim a gone exporter's items", || {
                    frontier.export_claim(&id, &group, lease, batch)
                })
                .await?;
            match claimed {
                Some(items) if !items.is_empty() => {
                    tracing::info!(
                        count = items.len(),
                        "took over items a gone exporter had not acknowledged"
                    );
                    if let Some(series) = &self.series {
                        series.taken_back(items.len() as u64);
                    }
                    return Ok(Some(Taken::Items(items)));
                }
                None => return Ok(None),
                _ => {}
            }
        }
        // Waiting on one shard only: each then gets its turn.
        let block = if self.shards.len() == 1 {
            self.options.idle_wait.max(Duration::from_millis(100))
        } else {
            Duration::from_millis(50)
        };
        let read = self
            .redis("read items", || {
                frontier.export_read(&id, &group, batch, block)
            })
            .await?;
        Ok(read.map(Taken::Items))
    }

    /// Records (or forgets) stream ids the heartbeat keeps.
    fn hold_ids(&self, shard: usize, ids: &[String], hold: bool) {
        if let Ok(mut in_hand) = self.in_hand.lock() {
            if hold {
                in_hand[shard].extend_from_slice(ids);
            } else {
                in_hand[shard].retain(|i| !ids.contains(i));
            }
        }
    }

    /// The items' rows written to the store, waiting while it is down:
    /// how each item ends (its dead letter if it has none), or `None`
    /// when stopped first.
    async fn write(&mut self, delivered: &[Delivered]) -> Result<Option<Vec<Ack>>, ExportError> {
        let schema = self.schema.clone();
        let mut rows: Vec<Row<'_>> = Vec::new();
        let mut row_of: Vec<Option<usize>> = Vec::new();
        let mut dead: Vec<Option<(String, Option<String>)>> = Vec::new();
        for d in delivered {
            let parsed = match &d.item {
                Some(item) => schema.row(item),
                None => Err(
                    "the stream entry has no `item` field (not written by crawlworker, or deleted)"
                        .to_string(),
                ),
            };
            match parsed {
                Ok(row) => {
                    row_of.push(Some(rows.len()));
                    dead.push(None);
                    rows.push(row);
                }
                Err(reason) => {
                    row_of.push(None);
                    dead.push(Some((reason, None)));
                }
            }
        }
        let mut wait = FIRST_WAIT;
        let refusals = loop {
            let written = self.sink.write(&rows).await;
            self.store_is(!matches!(written, Err(SinkError::Unavailable(_))));
            match written {
                Ok(r) => break r,
                Err(SinkError::Fatal(m)) => return Err(ExportError::Store(m)),
                Err(SinkError::Unavailable(m)) => tracing::error!(
                    "{m}; the batch of {} items waits, unacknowledged, and is written again in {wait:?}",
                    rows.len()
                ),
            }
            if !self.pause(&mut wait).await {
                return Ok(None);
            }
        };
        for r in refusals {
            if let Some(i) = row_of.iter().position(|&x| x == Some(r.index)) {
                dead[i] = Some((r.reason, Some(rows[r.index].table.name.clone())));
            }
        }
        Ok(Some(
            delivered
                .iter()
                .zip(dead)
                .map(|(d, dead)| Ack {
                    id: d.id.clone().unwrap_or_default(),
                    dead: dead.map(|(reason, table)| self.dead_letter(d, reason, table)),
                })
                .collect(),
        ))
    }

    fn dead_letter(&self, d: &Delivered, reason: String, table: Option<String>) -> String {
        tracing::warn!(store = %self.store, table = ?table, "an item is set aside in the export dead letters: {reason}");
        serde_json::to_string(&ExportDeadLetter {
            item: d.item.clone().unwrap_or_default(),
            reason,
            table,
            store: self.store.clone(),
            exporter: self.id.clone(),
            time: crate::frontier::now_secs(),
        })
        .unwrap_or_default()
    }

    /// Acknowledges `acks` of `shard` (and records `files` to rename):
    /// false when they went to another exporter meanwhile.
    async fn ack(
        &mut self,
        shard: usize,
        acks: Vec<Ack>,
        files: Vec<String>,
        whole: bool,
    ) -> Result<bool, ExportError> {
        let frontier = self.shards[shard].clone();
        let (id, group, lease) = (
            self.id.clone(),
            self.options.group.clone(),
            self.options.claim_after,
        );
        let acked = self
            .redis("acknowledge exported items", || {
                frontier.export_ack(&id, &group, lease, &acks, &files, whole)
            })
            .await?;
        match acked {
            Some(Acked::Done { exported, refused }) => {
                self.tally.exported += exported;
                self.tally.refused += refused;
                if let Some(series) = &self.series {
                    series.acknowledged(exported, refused);
                }
                Ok(true)
            }
            Some(Acked::Lost) => {
                tracing::warn!("items this exporter wrote went to another exporter meanwhile (it was thought gone): the store's upserts make the second write harmless");
                self.fresh[shard] = !self.stream();
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// This exporter was found gone (list sink): what it held went back
    /// to the others, so it forgets it and starts afresh.
    async fn lost(&mut self, shard: usize) {
        tracing::warn!("this exporter was thought gone (silent for over {:?}): its unacknowledged items went back to the others; starting afresh", self.options.claim_after);
        // Open files hold this shard's items, or, when no shard's items
        // are held, only rows of a batch whose write failed half-way:
        // neither may be acknowledged now (see `super::stale`).
        if !self.held[shard].is_empty() || self.held.iter().all(Vec::is_empty) {
            self.sink.discard().await;
            self.held[shard].clear();
        }
        self.fresh[shard] = true;
    }

    /// Seals what a holding sink wrote, acknowledges it, then gives its
    /// files their final names.
    async fn seal_and_ack(&mut self) -> Result<(), ExportError> {
        if !self.sink.holds() || self.held.iter().all(Vec::is_empty) {
            return Ok(());
        }
        let mut wait = FIRST_WAIT;
        let sealed = loop {
            let sealed = self.sink.seal().await;
            self.store_is(!matches!(sealed, Err(SinkError::Unavailable(_))));
            match sealed {
                Ok(s) => break s,
                Err(SinkError::Fatal(m)) => return Err(ExportError::Store(m)),
                Err(SinkError::Unavailable(m)) => tracing::error!("{m}; trying again in {wait:?}"),
            }
            if !self.pause(&mut wait).await {
                return Ok(());
            }
        };
        let files: Vec<String> = sealed
            .iter()
            .map(|s| s.temp.display().to_string())
            .collect();
        let mut all_acked = true;
        for shard in 0..self.shards.len() {
            let acks = std::mem::take(&mut self.held[shard]);
            if acks.is_empty() {
                continue;
            }
            let ids: Vec<String> = acks.iter().map(|a| a.id.clone()).collect();
            let files = if all_acked { files.clone() } else { Vec::new() };
            all_acked &= self.ack(shard, acks, files, true).await?;
            self.hold_ids(shard, &ids, false);
        }
        for s in &sealed {
            if all_acked {
                self.rename(&s.temp, &s.done).await?;
            } else {
                let _ = std::fs::remove_file(&s.temp);
            }
        }
        Ok(())
    }

    /// Gives an acknowledged file its final name and forgets it.
    async fn rename(
        &self,
        temp: &std::path::Path,
        done: &std::path::Path,
    ) -> Result<(), ExportError> {
        if let Err(e) = std::fs::rename(temp, done) {
            tracing::error!(
                "cannot rename {} to {}: {e}; the next exporter started on the directory does it",
                temp.display(),
                done.display()
            );
            return Ok(());
        }
        let path = temp.display().to_string();
        for frontier in &self.shards {
            self.redis("forget a renamed file", || frontier.export_renamed(&path))
                .await?;
        }
        Ok(())
    }

    /// Renames the files a killed exporter acknowledged and did not rename
    /// (those of this store's directory).
    async fn finish_renames(&self) -> Result<(), ExportError> {
        for frontier in &self.shards {
            let Some(pending) = self
                .redis("read the files to rename", || frontier.export_renames())
                .await?
            else {
                return Ok(());
            };
            for (temp, _) in pending {
                let temp = std::path::PathBuf::from(temp);
                let Some(done) = super::sinks::files::done_name(&temp) else {
                    continue;
                };
                if temp.exists() {
                    tracing::info!("renaming {}, acknowledged by an exporter that stopped before it renamed it", temp.display());
                    self.rename(&temp, &done).await?;
                } else if done.exists() {
                    let path = temp.display().to_string();
                    self.redis("forget a renamed file", || frontier.export_renamed(&path))
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// Takes back the items of gone exporters, every `claim_after / 2`
    /// (or now, with `force`).
    async fn reclaim(&mut self, force: bool) -> Result<(), ExportError> {
        let due = self
            .last_reclaim
            .is_none_or(|t| t.elapsed() >= self.options.claim_after / 2);
        if !force && !due {
            return Ok(());
        }
        self.last_reclaim = Some(Instant::now());
        for frontier in self.shards.clone() {
            let id = self.id.clone();
            let back = self
                .redis("take back a gone exporter's items", || {
                    frontier.export_reclaim(&id, FORGET_AFTER)
                })
                .await?;
            if let Some(n) = back.filter(|n| *n > 0) {
                tracing::info!(
                    "{n} items a gone exporter had not acknowledged are back in the items list"
                );
                if let Some(series) = &self.series {
                    series.taken_back(n);
                }
            }
        }
        self.sweep().await;
        Ok(())
    }

    /// Removes the temporary files of gone exporters whose items were
    /// taken back (a files store; see `super::stale`). A Redis outage
    /// leaves them for the next time.
    async fn sweep(&self) {
        let Some(dir) = self.sink.directory() else {
            return;
        };
        let sweep = super::stale::Sweep {
            dir,
            tables: self.schema.tables.iter().map(|t| t.name.as_str()).collect(),
            me: &self.id,
            group: &self.options.group,
        };
        if let Err(e) = sweep.run(&self.shards).await {
            tracing::warn!(
                "cannot tell which temporary files of gone exporters to remove ({e}); looking again later"
            );
        }
    }

    /// Records whether the store answered, for the metrics.
    fn store_is(&mut self, up: bool) {
        self.store_up = Some(up);
        if let Some(series) = &self.series {
            series.store_up(up);
        }
    }

    /// An idle exporter serving metrics checks, every [`CHECK_EVERY`],
    /// that its store still answers (a busy one learns it by writing).
    async fn check_store(&mut self) {
        if self.series.is_none() || self.last_check.is_some_and(|t| t.elapsed() < CHECK_EVERY) {
            return;
        }
        self.last_check = Some(Instant::now());
        let was_up = self.store_up;
        match self.sink.check().await {
            Ok(()) => {
                if was_up == Some(false) {
                    tracing::info!(store = %self.store, "the store answers again");
                }
                self.store_is(true);
            }
            Err(SinkError::Unavailable(m) | SinkError::Fatal(m)) => {
                if was_up != Some(false) {
                    tracing::warn!("{m}; the exporter has nothing to write now and checks again in {CHECK_EVERY:?}");
                }
                self.store_is(false);
            }
        }
    }

    /// Whether the crawl is drained and every item acknowledged.
    async fn drained(&mut self) -> Result<bool, ExportError> {
        for frontier in self.shards.clone() {
            let Some(status) = self
                .redis("read the crawl's status", || frontier.status())
                .await?
            else {
                return Ok(false);
            };
            if !status.drained() {
                return Ok(false);
            }
        }
        // Nothing more comes: the files open now are the last.
        self.seal_and_ack().await?;
        self.reclaim(true).await?;
        for frontier in self.shards.clone() {
            let group = self.options.group.clone();
            let Some(backlog) = self
                .redis("count the items left", || frontier.export_backlog(&group))
                .await?
            else {
                return Ok(false);
            };
            if backlog.waiting > 0 || backlog.unacked > 0 {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Logs progress every [`REPORT_EVERY`] (or now, with `now`).
    async fn report(&mut self, now: bool) {
        if !now && self.last_report.elapsed() < REPORT_EVERY {
            return;
        }
        self.last_report = Instant::now();
        tracing::info!(
            exported = self.tally.exported,
            refused = self.tally.refused,
            store = %self.store,
            "export progress"
        );
    }

    /// Renews the lease (and keeps held stream entries) while the loop
    /// runs, every third of `claim_after`.
    fn heartbeat(&self) -> tokio::task::JoinHandle<()> {
        let shards = self.shards.clone();
        let (id, lease, group) = (
            self.id.clone(),
            self.options.claim_after,
            self.options.group.clone(),
        );
        let in_hand = self.in_hand.clone();
        let fresh: Vec<bool> = self.fresh.clone();
        tokio::spawn(async move {
            let mut first = true;
            let mut renewed = vec![true; shards.len()];
            loop {
                for (i, frontier) in shards.iter().enumerate() {
                    // A list's exporter found gone registers anew with its
                    // next take (having dropped what it held); a stream's
                    // lease only says it is alive, so it registers here.
                    let stream = frontier.sink() == ItemSink::Stream;
                    let register = (first && fresh[i]) || (stream && !renewed[i]);
                    match frontier.export_beat(&id, lease, register).await {
                        Ok(r) => renewed[i] = r,
                        Err(e) => tracing::warn!("cannot renew the exporter's lease: {e}"),
                    }
                    let ids = in_hand.lock().map(|h| h[i].clone()).unwrap_or_default();
                    if stream {
                        if let Err(e) = frontier.export_touch(&id, &group, &ids).await {
                            tracing::warn!("cannot keep the held items: {e}");
                        }
                    }
                }
                first = false;
                tokio::time::sleep(lease / 3).await;
            }
        })
    }

    /// Says goodbye: the lease is dropped when nothing is held.
    async fn leave(&mut self) {
        self.report(true).await;
        for frontier in &self.shards {
            if let Err(e) = frontier.export_leave(&self.id).await {
                tracing::warn!("cannot drop the exporter's lease ({e}); it runs out by itself");
            }
        }
    }
}
