//! A spider's status with its upstreams (see [`crate::frontier::pipeline`]):
//! the queues of this spider and of every spider that hands it work, read
//! in one step, and the relations this spider's side records for the
//! spiders it feeds.
//!
//! The upstreams a status call passes are those the last call found; the
//! call returns the `upstreams` hashes it read beside the queues, and when
//! they name a spider that was not passed (a new relation, a longer chain),
//! the call is made again with it. So in the steady state a status is one
//! round trip, and the queues and the relations it answers from were read
//! at one instant.

use super::protocol::{ChainRecord, StatusArgs, UpstreamShardArgs};
use super::scripts::SCRIPTS;
use super::{err, ms, RedisFrontier, Result};
use crate::frontier::pipeline::{
    self, Edges, Found, ReadHashes, UpstreamKeys, UpstreamRecord, UpstreamStatus,
};
use crate::frontier::{now_secs, Heartbeat, QueueStatus};

/// How many calls a status makes at most to follow a chain it had not
/// seen (each finds the next stage): longer chains are followed over the
/// next calls.
const MAX_ROUNDS: usize = 8;

/// What one status call read.
struct Reading {
    status: QueueStatus,
    /// This spider's `upstreams` hash.
    own: Edges,
    /// For each upstream passed, in order: its sizes and its hash.
    chain: Vec<(UpstreamStatus, Edges)>,
    /// What moves whenever work moves towards this spider outside the
    /// status call's step: the tasks sharded upstreams delivered to it
    /// (read in the step), then each sharded upstream's shards' request
    /// sequences. Empty without a sharded upstream.
    marks: Vec<u64>,
}

impl RedisFrontier {
    /// The queue sizes of this spider and of its upstreams. Those in its
    /// slot are read in one step (see the module's doc); a sharded
    /// upstream's shards, in slots of their own, after it, one step each.
    /// Work may move towards this spider between those steps (a page
    /// committed on a shard read later hands a task through a shard read
    /// before), so a reading that finds this spider drained is taken
    /// again, and stands only when nothing moved between the two: no
    /// shard's request sequence (every step that brings a shard work
    /// draws from it) and not this spider's count of delivered tasks.
    /// Nothing was left then at the instant between the two readings.
    pub(super) async fn status_with_upstreams(&self) -> Result<QueueStatus> {
        super::sharded::settled_reading(|| self.status_once()).await
    }

    /// One reading (see [`RedisFrontier::status_with_upstreams`]), and its
    /// marks.
    async fn status_once(&self) -> Result<(QueueStatus, Vec<u64>)> {
        let mut known = self.known_upstreams();
        let now = now_secs();
        let believed = |seen: f64| pipeline::still_said(seen, now, self.lease);
        let mut round = 0;
        loop {
            round += 1;
            let reading = self.read_status(&known).await?;
            let read: ReadHashes = known
                .iter()
                .zip(&reading.chain)
                .map(|(f, (_, edges))| (f.spider.clone(), (f.keys.clone(), edges.clone())))
                .collect();
            let (found, complete) =
                pipeline::walk(&self.keys.requests, &reading.own, &read, believed);
            if complete || round == MAX_ROUNDS {
                let mut status = reading.status;
                status.upstreams = found
                    .iter()
                    .map(|f| {
                        let read = known.iter().position(|k| k.spider == f.spider);
                        // Not read yet (a chain longer than the rounds):
                        // taken as producing until the next status reads it.
                        let sizes = read.map_or(
                            UpstreamStatus {
                                producing: true,
                                ..UpstreamStatus::default()
                            },
                            |i| reading.chain[i].0.clone(),
                        );
                        UpstreamStatus {
                            spider: f.spider.clone(),
                            hands_to: f.hands_to.clone(),
                            ..sizes
                        }
                    })
                    .collect();
                self.remember_upstreams(found);
                return Ok((status, reading.marks));
            }
            known = found;
        }
    }

    fn known_upstreams(&self) -> Vec<Found> {
        self.upstreams_known
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    fn remember_upstreams(&self, found: Vec<Found>) {
        if let Ok(mut known) = self.upstreams_known.lock() {
            *known = found;
        }
    }

    /// One call of the status script with the upstreams `known` in this
    /// spider's reach, then a reading of each shard of those sharded.
    async fn read_status(&self, known: &[Found]) -> Result<Reading> {
        let (sharded, plain): (Vec<&Found>, Vec<&Found>) =
            known.iter().partition(|f| !f.keys.shards.is_empty());
        let mut reading = self.read_status_step(&plain).await?;
        if sharded.is_empty() {
            reading.marks.clear();
            return Ok(reading);
        }
        let mut chain = reading.chain.into_iter();
        let mut merged = Vec::with_capacity(known.len());
        for f in known {
            if f.keys.shards.is_empty() {
                merged.extend(chain.next());
            } else {
                let (sizes, edges, sequences) = self.read_sharded(&f.keys).await?;
                merged.push((sizes, edges));
                reading.marks.extend(sequences);
            }
        }
        reading.chain = merged;
        Ok(reading)
    }

    /// A sharded upstream's sizes summed over its shards (what waits in
    /// their outboxes as queued), its `upstreams` hash (shard 0's), and
    /// its shards' request sequences: one step per shard.
    async fn read_sharded(&self, u: &UpstreamKeys) -> Result<(UpstreamStatus, Edges, Vec<u64>)> {
        let mut sum = UpstreamStatus::default();
        let (mut edges, mut sequences) = (Edges::new(), Vec::new());
        for i in 0..u.shards.len() {
            let (sizes, shard_edges, sequence) = self.read_upstream_shard(u, i).await?;
            if i == 0 {
                edges = shard_edges;
                sum.start = sizes.start;
                sum.paused = sizes.paused;
                sum.live_workers = sizes.live_workers;
            }
            sum.queued += sizes.queued;
            sum.outboxed += sizes.outboxed;
            sum.inflight += sizes.inflight;
            sum.delayed += sizes.delayed;
            sum.page_limit_reached |= sizes.page_limit_reached;
            sequences.push(sequence);
        }
        sum.producing = sum.producing();
        Ok((sum, edges, sequences))
    }

    /// Shard `i` of the sharded upstream `u`, in one step
    /// (`upstream_shard.lua`): its sizes, with what waits in its outboxes
    /// as queued, its `upstreams` hash and its request sequence.
    async fn read_upstream_shard(
        &self,
        u: &UpstreamKeys,
        i: usize,
    ) -> Result<(UpstreamStatus, Edges, u64)> {
        let shard = &u.shards[i];
        // Only shard 0 holds the start key, the upstreams hash and the
        // workers; the others read none, and name keys of their own slot
        // in their places.
        let whole = i == 0;
        let (start, upstreams, workers) = if whole {
            (&u.start_urls, &u.upstreams, &u.workers)
        } else {
            (&shard.requests, &shard.control, &shard.control)
        };
        let mut call = SCRIPTS.upstream_shard.call_choosing(
            &self.keys,
            self.sink.sink,
            &[
                ("start_urls", start),
                ("requests", &shard.requests),
                ("inflight", &shard.inflight),
                ("delayed", &shard.delayed),
                ("control", &shard.control),
                ("upstreams", upstreams),
                ("workers", workers),
                ("sequence", &shard.sequence),
            ],
            UpstreamShardArgs {
                start_kind: u.start_kind.clone(),
                live_ms: ms(Heartbeat::gone_after(self.lease)),
                whole: if whole { "1" } else { "0" }.to_string(),
            },
        );
        for outbox in &shard.outboxes {
            call.more_key(outbox);
        }
        let v: Vec<redis::Value> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err(
                "read the status of a shard of an upstream at",
                &shard.requests,
            ))?;
        let (mut sizes, edges) = parse_upstream(v.first());
        sizes.outboxed = number(v.get(2));
        sizes.queued += sizes.outboxed;
        Ok((sizes, edges, number(v.get(1))))
    }

    /// One call of the status script with the upstreams `known`.
    async fn read_status_step(&self, known: &[&Found]) -> Result<Reading> {
        let k = &self.keys;
        let args = StatusArgs {
            start_kind: self.kind.as_str().to_string(),
            dupe_spec: self.dupe_spec.clone(),
            sink: self.sink.sink.as_str().to_string(),
            live_ms: ms(Heartbeat::gone_after(self.lease)),
        };
        let mut call = SCRIPTS.status.call(k, self.sink.sink, args);
        for f in known {
            let u = &f.keys;
            for key in [
                &u.start_urls,
                &u.requests,
                &u.inflight,
                &u.delayed,
                &u.control,
                &u.upstreams,
                &u.workers,
            ] {
                call.more_key(key);
            }
            call.record(ChainRecord {
                start_kind: u.start_kind.clone(),
            });
        }
        let v: Vec<redis::Value> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(err("read the status of", &k.requests))?;
        Ok(parse_reading(v))
    }

    /// Records that this spider's side hands work on: each relation of its
    /// pipeline, said now (see [`crate::frontier::pipeline`]). Nothing to
    /// do for a spider that hands nothing on.
    pub async fn record_relations(&self) -> Result<()> {
        let Some(first) = self.relations.first() else {
            return Ok(());
        };
        if self.shard.is_some() {
            return self.record_relations_apart().await;
        }
        let mut pipe = redis::pipe();
        self.add_relations(&mut pipe);
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("record the hand-off relation in", &first.into))
    }

    /// Records a sharded spider's relations one command each: the spiders
    /// it hands work to are in slots of their own (see
    /// [`RedisFrontier::record_relations`]).
    pub(super) async fn record_relations_apart(&self) -> Result<()> {
        let seen = now_secs();
        for r in &self.relations {
            let record = UpstreamRecord {
                keys: r.keys.clone(),
                seen,
            };
            redis::cmd("HSET")
                .arg(&r.into)
                .arg(&r.upstream)
                .arg(super::to_json(&record))
                .query_async::<()>(&mut self.conn.clone())
                .await
                .map_err(err("record the hand-off relation in", &r.into))?;
        }
        Ok(())
    }

    /// Adds the HSETs that record this spider's relations to `pipe`, but
    /// a sharded spider's (see [`RedisFrontier::record_relations_apart`]).
    pub(super) fn add_relations(&self, pipe: &mut redis::Pipeline) {
        if self.shard.is_some() {
            return;
        }
        let seen = now_secs();
        for r in &self.relations {
            let record = UpstreamRecord {
                keys: r.keys.clone(),
                seen,
            };
            pipe.hset(&r.into, &r.upstream, super::to_json(&record))
                .ignore();
        }
    }
}

/// A number of the reply (0 when missing or not one).
fn number(v: Option<&redis::Value>) -> u64 {
    v.and_then(|v| redis::from_redis_value::<u64>(v).ok())
        .unwrap_or(0)
}

/// A hash of the reply, as pairs (empty when it is not one).
fn edges(v: Option<&redis::Value>) -> Edges {
    v.and_then(|v| redis::from_redis_value::<Edges>(v).ok())
        .unwrap_or_default()
}

/// The status script's reply (see `scripts/status.lua`).
fn parse_reading(v: Vec<redis::Value>) -> Reading {
    let marks = vec![number(v.get(14))];
    let at = |i: usize| number(v.get(i));
    let status = QueueStatus {
        start: at(0),
        queued: at(1),
        // A sharded spider's status adds its outboxes (sharded.rs).
        outboxed: 0,
        inflight: at(2),
        dead: at(3),
        failed: at(4),
        dupefilter: at(5),
        items: at(6),
        delayed: at(7),
        scheduled: at(8),
        overdue: at(9),
        paused: at(10) == 1,
        page_limit_reached: at(11) == 1,
        items_backlog_full: at(12) == 1,
        upstreams: Vec::new(),
    };
    let own = edges(v.get(13));
    let chain = v.iter().skip(15).map(|u| parse_upstream(Some(u))).collect();
    Reading {
        status,
        own,
        chain,
        marks,
    }
}

/// An upstream's sizes and its `upstreams` hash, as `upstream_sizes` in
/// `scripts/lib/upstreams.lua` reads them.
fn parse_upstream(v: Option<&redis::Value>) -> (UpstreamStatus, Edges) {
    let fields: Vec<redis::Value> = v
        .and_then(|u| redis::from_redis_value(u).ok())
        .unwrap_or_default();
    let n = |i: usize| number(fields.get(i));
    let mut sizes = UpstreamStatus {
        start: n(0),
        queued: n(1),
        inflight: n(2),
        delayed: n(3),
        paused: n(4) == 1,
        page_limit_reached: n(5) == 1,
        live_workers: n(6),
        ..UpstreamStatus::default()
    };
    sizes.producing = sizes.producing();
    (sizes, edges(fields.get(7)))
}
