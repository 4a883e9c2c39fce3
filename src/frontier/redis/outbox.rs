//! Handing requests between the shards of a sharded spider (see
//! `docs/scaling.md`, "Hand-offs between shards", and
//! `scripts/lib/outbox.lua`). A shard's frontier pushes the requests of
//! another shard to its outbox for it; a mover takes the outbox's first
//! entries under a lock, delivers them to their shard, and trims them
//! while the lock is still its own. Each step is one script call, and a
//! repeated delivery is filtered by the target's dupefilter, or for a
//! request without fingerprint skipped by its token, so a mover killed or
//! stalled between its steps costs a repeat, never a lost or doubled
//! request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::protocol::{
    HandoffDeliverArgs, NoArgs, OutboxDeliverArgs, OutboxRecord, OutboxTakeArgs, OutboxTrimArgs,
};
use super::scripts::SCRIPTS;
use super::{clamped, encode, fingerprint_arg, ms, RedisFrontier, Result};
use crate::frontier::Handoff;
use crate::request::Request;

/// How many entries one move takes, delivers and trims at most, so that
/// no call holds Redis for long (as a commit's parts of links).
pub const MOVE_BATCH: usize = 1024;

/// How long a mover's lock lasts: long enough for its three calls, short
/// enough that entries a dead mover held move again soon.
pub const MOVER_LOCK: Duration = Duration::from_secs(10);

/// What one delivery did with the entries it was given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Queued on the target.
    pub enqueued: u64,
    /// Found in the target's dupefilter.
    pub filtered: u64,
    /// Without fingerprint, and queued by the target before (a repeat by
    /// another mover).
    pub skipped: u64,
    /// Not an outbox entry (written by something else than crawlworker),
    /// set aside as a dead letter.
    pub unreadable: u64,
}

impl Delivered {
    pub fn add(&mut self, other: Delivered) {
        self.enqueued += other.enqueued;
        self.filtered += other.filtered;
        self.skipped += other.skipped;
        self.unreadable += other.unreadable;
    }
}

/// Numbers the moves of this process, so that each move's lock token is
/// its own (a retried call of the same move finds its own lock).
static MOVES: AtomicU64 = AtomicU64::new(0);

/// Numbers the requests without fingerprint this process hands to other
/// shards, for their tokens.
static HANDED: AtomicU64 = AtomicU64::new(0);

/// The token of a request without fingerprint that `worker` hands to
/// another shard: unique to this hand-off (the worker id is unique to the
/// process), and made here, not in Redis, so that a failover that loses a
/// shard's last writes cannot hand out one of its tokens again.
pub(super) fn hand_token(worker: &str) -> String {
    format!("{worker}#{}", HANDED.fetch_add(1, Ordering::Relaxed))
}

impl RedisFrontier {
    /// Pushes `requests` to this shard's outbox for shard `to`, each
    /// without fingerprint with a token of its own. Requests over the size
    /// bound are left out; returns how many were pushed.
    pub async fn outbox_push<'r>(
        &self,
        to: usize,
        requests: impl IntoIterator<Item = &'r Request>,
    ) -> Result<u64> {
        let outbox = self.keys.outbox(to);
        let mut call = SCRIPTS.outbox_push.call_choosing(
            &self.keys,
            self.sink.sink,
            &[("outbox", &outbox)],
            NoArgs {},
        );
        let mut pushed = 0;
        for request in requests {
            if let Some(json) = encode(request) {
                call.record(OutboxRecord {
                    token: if request.dont_filter {
                        hand_token(&self.worker)
                    } else {
                        String::new()
                    },
                    fingerprint: fingerprint_arg(request),
                    priority: clamped(request.priority).to_string(),
                    json,
                });
                pushed += 1;
            }
        }
        if pushed == 0 {
            return Ok(0);
        }
        call.invoke_async::<u64>(&mut self.conn.clone())
            .await
            .map_err(super::err("hand requests to another shard", &outbox))
    }

    /// This shard's request sequence: every step that queues requests
    /// draws their ids from it, so it grows whenever the shard queues
    /// anything (see `ShardedFrontier`'s status).
    pub async fn sequence(&self) -> Result<u64> {
        let key = &self.keys.sequence;
        let n: Option<u64> = redis::cmd("GET")
            .arg(key)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(super::err("read", key))?;
        Ok(n.unwrap_or(0))
    }

    /// How many requests and tasks wait in this shard's outboxes, its
    /// hand-off outboxes included: the spider is not drained, and its
    /// workers (whose movers deliver them) do not stop, while a task for
    /// another spider waits in one.
    pub async fn outboxes_len(&self) -> Result<u64> {
        let mut sum = 0;
        for to in self.shard.iter().flat_map(|place| place.others()) {
            sum += self.outbox_len(to).await?;
        }
        if self.shard.is_some() {
            for h in &self.handoffs {
                sum += self.handoff_outbox_len(h).await?;
            }
        }
        Ok(sum)
    }

    /// How many requests wait in this shard's outbox for shard `to`: one
    /// plain command, cheaper for Redis than a move's script call.
    pub async fn outbox_len(&self, to: usize) -> Result<u64> {
        let outbox = self.keys.outbox(to);
        redis::cmd("LLEN")
            .arg(&outbox)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(super::err("read the length of", &outbox))
    }

    /// A token for one move by this worker.
    pub fn mover_token(&self) -> String {
        format!("{}#{}", self.worker, MOVES.fetch_add(1, Ordering::Relaxed))
    }

    /// The first step of a move: takes the lock of this shard's outbox for
    /// shard `to` as `mover` for `lock`, and reads up to `max` entries.
    /// Empty when the outbox is, or another mover holds its lock.
    pub async fn outbox_take(
        &self,
        to: usize,
        mover: &str,
        lock: Duration,
        max: usize,
    ) -> Result<Vec<String>> {
        let box_keys = (self.keys.outbox(to), self.keys.outbox_lock(to));
        self.take_from(&box_keys, mover, lock, max).await
    }

    /// [`RedisFrontier::outbox_take`] from the outbox and lock `box_keys`
    /// of this shard.
    async fn take_from(
        &self,
        (outbox, outbox_lock): &(String, String),
        mover: &str,
        lock: Duration,
        max: usize,
    ) -> Result<Vec<String>> {
        SCRIPTS
            .outbox_take
            .call_choosing(
                &self.keys,
                self.sink.sink,
                &[("outbox", outbox), ("outbox_lock", outbox_lock)],
                OutboxTakeArgs {
                    mover: mover.to_string(),
                    lock_ms: ms(lock),
                    max: max.to_string(),
                },
            )
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(super::err("take entries from an outbox", outbox))
    }

    /// The second step, on the target shard: queues the `entries` of
    /// another shard's outbox (`outbox`, named in the dead letters of
    /// entries crawlworker did not write), each through this shard's
    /// dupefilter, but those with a token this shard queued before.
    pub async fn outbox_deliver(
        &self,
        outbox: &str,
        mover: &str,
        entries: &[String],
    ) -> Result<Delivered> {
        let k = &self.keys;
        // Tasks for another spider go on to this shard's hand-off
        // outboxes, found by the spider's name.
        let names: Vec<&str> = self.handoffs.iter().map(|h| h.spider.as_str()).collect();
        let mut call = SCRIPTS.outbox_deliver.call(
            k,
            self.sink.sink,
            OutboxDeliverArgs {
                outbox: outbox.to_string(),
                mover: mover.to_string(),
                wake: k.wake.clone(),
                dupe_spec: self.dupe_spec.clone(),
                handoff_spiders: names.join(" "),
            },
        );
        for name in names {
            call.more_key(&k.handoff_outbox(name));
        }
        call.values(entries);
        let reply: Vec<u64> =
            call.invoke_async(&mut self.conn.clone())
                .await
                .map_err(super::err(
                    "deliver requests from another shard",
                    &k.requests,
                ))?;
        let n = |i: usize| reply.get(i).copied().unwrap_or(0);
        Ok(Delivered {
            enqueued: n(0),
            filtered: n(1),
            skipped: n(2),
            unreadable: n(3),
        })
    }

    /// The last step: trims the `count` entries `mover` took from this
    /// shard's outbox for shard `to`, if its lock is still its own.
    /// Returns whether it was.
    pub async fn outbox_trim(&self, to: usize, mover: &str, count: usize) -> Result<bool> {
        let box_keys = (self.keys.outbox(to), self.keys.outbox_lock(to));
        self.trim_from(&box_keys, mover, count).await
    }

    /// [`RedisFrontier::outbox_trim`] of the outbox and lock `box_keys`
    /// of this shard.
    async fn trim_from(
        &self,
        (outbox, outbox_lock): &(String, String),
        mover: &str,
        count: usize,
    ) -> Result<bool> {
        SCRIPTS
            .outbox_trim
            .call_choosing(
                &self.keys,
                self.sink.sink,
                &[("outbox", outbox), ("outbox_lock", outbox_lock)],
                OutboxTrimArgs {
                    mover: mover.to_string(),
                    count: count.to_string(),
                },
            )
            .invoke_async::<u64>(&mut self.conn.clone())
            .await
            .map(|trimmed| trimmed == 1)
            .map_err(super::err("trim an outbox", outbox))
    }

    /// Moves this shard's outbox for shard `to` into `target`, that
    /// shard's frontier, a batch at a time, until it is empty or another
    /// mover holds it. Returns what the deliveries did.
    pub async fn move_outbox(&self, to: usize, target: &RedisFrontier) -> Result<Delivered> {
        let mut moved = Delivered::default();
        loop {
            let mover = self.mover_token();
            let entries = self.outbox_take(to, &mover, MOVER_LOCK, MOVE_BATCH).await?;
            if entries.is_empty() {
                return Ok(moved);
            }
            let outbox = self.keys.outbox(to);
            let delivered = target.outbox_deliver(&outbox, &mover, &entries).await?;
            if delivered.unreadable > 0 {
                tracing::warn!(
                    %outbox,
                    count = delivered.unreadable,
                    "outbox entries crawlworker did not write were set aside as dead letters"
                );
            }
            moved.add(delivered);
            if !self.outbox_trim(to, &mover, entries.len()).await? {
                // Another mover took over: it delivers what is left.
                return Ok(moved);
            }
        }
    }

    /// How many tasks wait in this shard's hand-off outbox for spider
    /// `h`: one plain command.
    pub async fn handoff_outbox_len(&self, h: &Handoff) -> Result<u64> {
        let outbox = self.keys.handoff_outbox(&h.spider);
        redis::cmd("LLEN")
            .arg(&outbox)
            .query_async(&mut self.conn.clone())
            .await
            .map_err(super::err("read the length of", &outbox))
    }

    /// Moves this shard's hand-off outbox for spider `h` to its start key,
    /// a batch at a time (take, [`RedisFrontier::handoff_deliver`], trim),
    /// until it is empty or another mover holds it. Returns how many tasks
    /// were pushed.
    pub async fn move_handoffs(&self, h: &Handoff) -> Result<u64> {
        let box_keys = (
            self.keys.handoff_outbox(&h.spider),
            self.keys.handoff_outbox_lock(&h.spider),
        );
        let mut pushed = 0;
        loop {
            let mover = self.mover_token();
            let entries = self
                .take_from(&box_keys, &mover, MOVER_LOCK, MOVE_BATCH)
                .await?;
            if entries.is_empty() {
                return Ok(pushed);
            }
            pushed += self.handoff_deliver(h, &box_keys.0, &entries).await?;
            if !self.trim_from(&box_keys, &mover, entries.len()).await? {
                return Ok(pushed);
            }
        }
    }

    /// The second step of moving a hand-off outbox, on spider `h`'s slot:
    /// pushes the tasks `entries` of `outbox` to its start key, but those
    /// its inbox has (see `scripts/handoff_deliver.lua`). Returns how many
    /// were pushed.
    async fn handoff_deliver(&self, h: &Handoff, outbox: &str, entries: &[String]) -> Result<u64> {
        let mut call = SCRIPTS.handoff_deliver.call_choosing(
            &self.keys,
            self.sink.sink,
            &[
                ("start", &h.start_key),
                ("inbox", &h.inbox),
                ("control", &h.control),
                ("waiting", &h.waiting),
                ("dead", &h.dead),
                ("stats", &h.stats),
            ],
            HandoffDeliverArgs {
                outbox: outbox.to_string(),
                start_kind: h.kind.as_str().to_string(),
                wake: h.wake.clone(),
            },
        );
        call.values(entries);
        let reply: Vec<u64> = call
            .invoke_async(&mut self.conn.clone())
            .await
            .map_err(super::err("hand tasks to another spider at", &h.start_key))?;
        let unreadable = reply.get(2).copied().unwrap_or(0);
        if unreadable > 0 {
            tracing::warn!(
                %outbox,
                count = unreadable,
                "hand-off outbox entries crawlworker did not write were set aside as dead letters of spider {}",
                h.spider
            );
        }
        Ok(reply.first().copied().unwrap_or(0))
    }
}
