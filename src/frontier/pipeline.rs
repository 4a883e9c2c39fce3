//! Split pipelines seen from the frontier: which spiders hand work to a
//! spider (`to_spider`, directly or through others: its *upstreams*), how
//! that relation is kept in Redis so that every worker of the cluster
//! knows it, and when a spider with upstreams counts as drained.
//!
//! - **Recorded by the upstream's side.** A spider's workers (when they
//!   connect, and with every heartbeat after) and `push-urls` write one
//!   [`Relation`] per hand-off of its pipeline into the downstream
//!   spider's `upstreams` hash: the upstream's name → its key names and
//!   when this was last said ([`UpstreamRecord`]). The pipeline is the
//!   spider's hand-offs and, read from the files beside it, those of the
//!   spiders it hands to, and so on, so that the last stage of a chain
//!   knows the first before the middle one ever ran.
//! - **Forgotten when nobody says it any more.** A relation not renewed
//!   for [`Heartbeat::forgotten_after`] (an hour) is ignored and swept:
//!   an upstream whose file no longer hands work on, or whose workers are
//!   long gone, blocks nobody for longer.
//! - **Read with the queues, in one step.** The status script reads the
//!   spider's queues and those of every upstream at the same instant
//!   ([`walk`] finds them, round by round when a new one is found). A
//!   commit of an upstream pushes its hand-offs and gives up its lease in
//!   one step, so when both read empty at one instant nothing is on its
//!   way: the spider is drained ([`UpstreamStatus::producing`]).
//!
//! In a cycle (A → B → A) each spider is the other's upstream: both are
//! drained when both read empty at the same instant, which is when the
//! last hand-off either way has been crawled. What this module does not
//! own: the scripts (see `redis/upstreams.rs`) and the worker's stop
//! rule (`worker::turns`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::{Heartbeat, Keys, StartKind};

/// The key names a downstream spider's workers read of a spider that
/// hands it work: its queues (to tell whether it may still hand some on),
/// its own upstreams (to follow a chain) and its workers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamKeys {
    pub start_urls: String,
    /// `list`, `set` or `zset`.
    pub start_kind: String,
    pub requests: String,
    pub inflight: String,
    pub delayed: String,
    pub control: String,
    pub upstreams: String,
    pub workers: String,
    /// A sharded spider's shards, shard 0's first (whose keys are the
    /// ones above); empty for a spider that is not sharded. Its shards are
    /// in slots of their own, so a downstream spider reads each apart (see
    /// `redis/upstreams.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<UpstreamShard>,
}

/// The keys a downstream spider reads of one shard of a sharded upstream:
/// where its work waits, and its request sequence, which every step that
/// brings work to the shard moves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpstreamShard {
    pub requests: String,
    pub inflight: String,
    pub delayed: String,
    pub control: String,
    pub sequence: String,
    /// Its outboxes: for the other shards, and its hand-off outbox for
    /// the downstream spider.
    pub outboxes: Vec<String>,
}

impl UpstreamKeys {
    /// A spider's, from its keys.
    pub fn of(keys: &Keys, kind: StartKind) -> UpstreamKeys {
        UpstreamKeys {
            start_urls: keys.start_urls.clone(),
            start_kind: kind.as_str().to_string(),
            requests: keys.requests.clone(),
            inflight: keys.inflight.clone(),
            delayed: keys.delayed.clone(),
            control: keys.control.clone(),
            upstreams: keys.upstreams.clone(),
            workers: keys.workers.clone(),
            shards: Vec::new(),
        }
    }

    /// A sharded spider's (`keys`, shard 0's; `shards`: each shard's,
    /// shard 0's first), as the spider `downstream` reads them.
    pub fn of_shards(
        keys: &Keys,
        shards: &[Keys],
        kind: StartKind,
        downstream: &str,
    ) -> UpstreamKeys {
        let shard = |(i, k): (usize, &Keys)| UpstreamShard {
            requests: k.requests.clone(),
            inflight: k.inflight.clone(),
            delayed: k.delayed.clone(),
            control: k.control.clone(),
            sequence: k.sequence.clone(),
            outboxes: (0..shards.len())
                .filter(|&to| to != i)
                .map(|to| k.outbox(to))
                .chain([k.handoff_outbox(downstream)])
                .collect(),
        };
        UpstreamKeys {
            shards: shards.iter().enumerate().map(shard).collect(),
            ..UpstreamKeys::of(keys, kind)
        }
    }
}

/// A value of a downstream spider's `upstreams` hash: the upstream's key
/// names and when its side last said it hands work on (seconds since the
/// epoch, written last so the sweep finds it at the end of the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpstreamRecord {
    #[serde(flatten)]
    pub keys: UpstreamKeys,
    pub seen: f64,
}

/// One hand-off of a spider's pipeline, to record: spider `upstream`
/// hands work to the spider whose `upstreams` hash is `into`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub upstream: String,
    pub keys: UpstreamKeys,
    pub into: String,
}

/// Whether a relation last said at `seen` is still believed at `now`
/// (both seconds since the epoch), for a crawl whose leases last `lease`.
pub fn still_said(seen: f64, now: f64, lease: std::time::Duration) -> bool {
    now - seen <= Heartbeat::forgotten_after(lease).as_secs_f64()
}

/// One `upstreams` hash as read: (upstream's name, its record's JSON).
pub type Edges = Vec<(String, String)>;

/// The `upstreams` hashes of upstreams, by name, with the keys each was
/// read with.
pub type ReadHashes = HashMap<String, (UpstreamKeys, Edges)>;

/// A spider upstream of this one, as [`walk`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub spider: String,
    /// The spider it hands work to, when not this one (a chain).
    pub hands_to: Option<String>,
    pub keys: UpstreamKeys,
}

/// The spiders upstream of this one, nearest first, from the `upstreams`
/// hashes read: `own` (this spider's) and `read` (an upstream's, by its
/// name, with the keys it was read with). Relations no longer believed
/// (see [`still_said`]) and unreadable ones are skipped; a chain leading
/// back to this spider (`me`, its requests key) ends there. The second
/// value says whether the walk is complete: every upstream found was read
/// with the keys found (else read again with those found).
pub fn walk(
    me: &str,
    own: &[(String, String)],
    read: &ReadHashes,
    believed: impl Fn(f64) -> bool,
) -> (Vec<Found>, bool) {
    let parse = |edges: &[(String, String)], hands_to: Option<&str>| -> Vec<Found> {
        edges
            .iter()
            .filter_map(|(name, json)| {
                let record: UpstreamRecord = serde_json::from_str(json).ok()?;
                (believed(record.seen) && record.keys.requests != me).then(|| Found {
                    spider: name.clone(),
                    hands_to: hands_to.map(str::to_string),
                    keys: record.keys,
                })
            })
            .collect()
    };
    let mut found: Vec<Found> = Vec::new();
    let mut next = parse(own, None);
    let mut complete = true;
    while !next.is_empty() {
        let mut after = Vec::new();
        for f in next {
            if found.iter().any(|g| g.spider == f.spider) {
                continue;
            }
            match read.get(&f.spider) {
                Some((keys, edges)) if *keys == f.keys => {
                    after.extend(parse(edges, Some(&f.spider)));
                }
                _ => complete = false,
            }
            found.push(f);
        }
        next = after;
    }
    (found, complete)
}

/// A spider upstream of this one, read in the same step as this spider's
/// queues (see [`super::QueueStatus`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UpstreamStatus {
    pub spider: String,
    /// The spider it hands work to, when not this one (a chain).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hands_to: Option<String>,
    pub start: u64,
    pub queued: u64,
    /// Of `queued`, what waits in a sharded upstream's outboxes.
    pub outboxed: u64,
    pub inflight: u64,
    pub delayed: u64,
    pub paused: bool,
    pub page_limit_reached: bool,
    /// Its workers whose heartbeat is recent.
    pub live_workers: u64,
    /// Whether it may still hand work on, as read (see
    /// [`UpstreamStatus::producing`]; true for one not read yet).
    pub producing: bool,
}

impl UpstreamStatus {
    /// Whether it may still hand work on: it has start entries, queued,
    /// leased or waiting requests, unless it has reached `max_pages` with
    /// nothing in flight (it leases no more). Paused, it still may. What
    /// waits in its outboxes is on its way whatever the limit: its movers
    /// deliver it.
    pub fn producing(&self) -> bool {
        let work = self.start + self.queued + self.inflight + self.delayed > 0;
        self.outboxed > 0 || (work && !(self.page_limit_reached && self.inflight == 0))
    }

    /// What it still has, for people: `3 start entries, 12 queued, 2 in
    /// flight`.
    pub fn describe(&self) -> String {
        use crate::wording::{count, plural};
        let mut parts = Vec::new();
        if self.start > 0 {
            parts.push(plural(self.start as usize, "start entry", "start entries"));
        }
        for (n, what) in [
            (self.queued, "queued"),
            (self.inflight, "in flight"),
            (self.delayed, "waiting to retry"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        if parts.is_empty() {
            parts.push("nothing left".to_string());
        }
        if self.paused {
            parts.push("paused".to_string());
        }
        parts.push(match self.live_workers {
            0 => "no live worker".to_string(),
            n => count(n as usize, "live worker"),
        });
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frontier::KeyMode;

    fn keys(name: &str) -> UpstreamKeys {
        UpstreamKeys::of(
            &Keys::resolve(name, KeyMode::Plain, None, &[], None),
            StartKind::List,
        )
    }

    fn edge(name: &str, seen: f64) -> (String, String) {
        let record = UpstreamRecord {
            keys: keys(name),
            seen,
        };
        (
            name.to_string(),
            serde_json::to_string(&record).unwrap_or_default(),
        )
    }

    #[test]
    fn a_chain_is_found_round_by_round_and_a_cycle_ends_at_this_spider() {
        let me = keys("c").requests;
        let always = |_| true;
        // c's hash names b; b was not read yet: incomplete.
        let own = [edge("b", 1.0)];
        let (found, complete) = walk(&me, &own, &HashMap::new(), always);
        assert_eq!(found.len(), 1);
        assert!(!complete);
        // b read: it names a, and c itself (a cycle), which is skipped.
        let mut read = HashMap::new();
        read.insert(
            "b".to_string(),
            (keys("b"), vec![edge("a", 1.0), edge("c", 1.0)]),
        );
        let (found, complete) = walk(&me, &own, &read, always);
        assert!(!complete);
        assert_eq!(found[1].spider, "a");
        assert_eq!(found[1].hands_to.as_deref(), Some("b"));
        read.insert("a".to_string(), (keys("a"), vec![edge("b", 1.0)]));
        let (found, complete) = walk(&me, &own, &read, always);
        assert!(complete);
        let names: Vec<&str> = found.iter().map(|f| f.spider.as_str()).collect();
        assert_eq!(names, ["b", "a"]);
    }

    #[test]
    fn a_relation_nobody_renews_is_forgotten_after_an_hour() {
        let lease = std::time::Duration::from_secs(60);
        assert!(still_said(1000.0, 1000.0 + 3599.0, lease));
        assert!(!still_said(1000.0, 1000.0 + 3601.0, lease));
        let own = [edge("old", 1.0), edge("new", 5000.0)];
        let (found, _) = walk("me", &own, &HashMap::new(), |seen| {
            still_said(seen, 5000.0, lease)
        });
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].spider, "new");
    }

    #[test]
    fn an_upstream_produces_while_it_has_work_unless_its_page_limit_stops_it() {
        let mut u = UpstreamStatus::default();
        assert!(!u.producing());
        u.start = 2;
        assert!(u.producing());
        u.page_limit_reached = true;
        assert!(!u.producing(), "max_pages reached, nothing in flight");
        u.inflight = 1;
        assert!(u.producing(), "a page in flight may still hand work on");
        u.inflight = 0;
        u.outboxed = 1;
        u.queued += 1;
        assert!(
            u.producing(),
            "what waits in an outbox is delivered past the limit"
        );
    }
}
