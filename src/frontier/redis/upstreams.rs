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

use super::protocol::{ChainRecord, StatusArgs};
use super::scripts::SCRIPTS;
use super::{err, ms, RedisFrontier, Result};
use crate::frontier::pipeline::{self, Edges, Found, ReadHashes, UpstreamRecord, UpstreamStatus};
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
}

impl RedisFrontier {
    /// The queue sizes of this spider and of its upstreams, read in one
    /// step (see the module's doc).
    pub(super) async fn status_with_upstreams(&self) -> Result<QueueStatus> {
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
                return Ok(status);
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

    /// One call of the status script with the upstreams `known`.
    async fn read_status(&self, known: &[Found]) -> Result<Reading> {
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
        let mut pipe = redis::pipe();
        self.add_relations(&mut pipe);
        pipe.query_async::<()>(&mut self.conn.clone())
            .await
            .map_err(err("record the hand-off relation in", &first.into))
    }

    /// Adds the HSETs that record this spider's relations to `pipe`.
    pub(super) fn add_relations(&self, pipe: &mut redis::Pipeline) {
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
    let at = |i: usize| number(v.get(i));
    let status = QueueStatus {
        start: at(0),
        queued: at(1),
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
    let chain = v
        .iter()
        .skip(14)
        .map(|u| {
            let fields: Vec<redis::Value> = redis::from_redis_value(u).unwrap_or_default();
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
        })
        .collect();
    Reading { status, own, chain }
}
