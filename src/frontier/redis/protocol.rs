//! The typed script protocol: what each Lua script receives, declared once.
//!
//! A script's keys are declared by kind ([`Slot`]), so a call fills them
//! from the spider's [`Keys`] and nobody orders them by hand; its head
//! arguments are a struct (`LeaseArgs`, …) whose fields a caller must all
//! give; the repeated records after them (a commit's pages, a claim's
//! entries, …) are structs too. From the same declarations come the Lua
//! names a script reads: `K.requests`, `A.worker`, `REST` (the first
//! argument after the head) and record offsets such as `PAGE.lease_next`.
//! Keys come as a table ([`lua_preamble`]); argument and record names are
//! resolved to positions when the scripts are built ([`resolve_names`]),
//! so they cost a script nothing at run time. No script indexes `KEYS` or
//! `ARGV` by number; a test fails on any that does.
//!
//! (Model: mini-redis's `cmd/set.rs`, where one type owns both ends of its
//! wire format.)

use std::sync::LazyLock;

use super::super::keys::{KeyKind, Keys};
use super::super::ItemSink;

/// A struct whose fields, in order, are a wire layout.
pub trait Wire {
    /// Appends the fields, in wire order.
    fn write_to(self, out: &mut Vec<Vec<u8>>);
}

/// Declares a struct of named fields (text, or `: bytes` for raw bytes)
/// whose order is a wire layout: `FIELDS` names them for Lua,
/// [`Wire::write_to`] appends them in that order.
macro_rules! wire {
    ($(#[doc = $doc:literal])* $name:ident { $($body:tt)* }) => {
        wire! { $(#[doc = $doc])* $name: String { $($body)* } }
    };
    ($(#[doc = $doc:literal])* $name:ident: bytes { $($body:tt)* }) => {
        wire! { $(#[doc = $doc])* $name: Vec<u8> { $($body)* } }
    };
    ($(#[doc = $doc:literal])* $name:ident: $ty:ty { $( $(#[doc = $fdoc:literal])* $field:ident ),* $(,)? }) => {
        $(#[doc = $doc])*
        #[derive(Debug, Clone, Default)]
        pub struct $name {
            $( $(#[doc = $fdoc])* pub $field: $ty, )*
        }

        impl $name {
            /// The fields' names, in wire order.
            pub const FIELDS: &'static [&'static str] = &[$(stringify!($field)),*];
        }

        impl Wire for $name {
            fn write_to(self, out: &mut Vec<Vec<u8>>) {
                out.extend([$(Vec::<u8>::from(self.$field)),*]);
            }
        }
    };
}

/// Where a key a script receives comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The spider's key of this kind: `K.<kind's name in [keys]>` in Lua.
    Kind(KeyKind),
    /// The key items go to, the list or the stream by the sink: `K.items`.
    Items,
    /// A key the caller chooses, by this name: `K.<name>`.
    Chosen(&'static str),
}

/// A record repeated after the head arguments, and its Lua table of
/// offsets (`PAGE.lease_next` is the field's offset from the record's
/// first argument; `PAGE.SIZE` its length).
pub struct Record {
    pub lua: &'static str,
    pub fields: &'static [&'static str],
}

/// One script's layout.
pub struct Layout {
    /// The script (`scripts/<name>.lua`).
    pub name: &'static str,
    pub keys: Vec<Slot>,
    /// Keys after the declared ones, as the Lua list `K.<name>`.
    pub more_keys: Option<&'static str>,
    /// The head arguments: `A.<name>` in Lua.
    pub args: &'static [&'static str],
    /// The records the arguments after the head are made of (from `REST`
    /// on), for the reader of the layout, and the groups the keys after
    /// the declared ones come in, if they do.
    pub tail: Vec<&'static Record>,
}

impl Layout {
    /// The keys of a call, in the declared order: the spider's keys of the
    /// declared kinds, the sink's items key, the keys `chosen` by name.
    pub fn call_keys<'a>(
        &self,
        keys: &'a Keys,
        sink: ItemSink,
        chosen: &[(&'static str, &'a str)],
    ) -> Result<Vec<&'a str>, String> {
        self.keys
            .iter()
            .map(|slot| match slot {
                Slot::Kind(kind) => Ok(keys.get(*kind)),
                Slot::Items => Ok(keys.get(sink.key_kind())),
                Slot::Chosen(name) => chosen
                    .iter()
                    .find(|(n, _)| n == name)
                    .map(|(_, key)| *key)
                    .ok_or_else(|| format!("script {} needs the key `{name}`", self.name)),
            })
            .collect()
    }
}

/// The Lua name of a slot.
fn lua_name(slot: &Slot) -> &'static str {
    match slot {
        Slot::Kind(kind) => kind.name(),
        Slot::Items => "items",
        Slot::Chosen(name) => name,
    }
}

/// What a script's body starts with: `K`, its keys by name (a table, since
/// the helpers take it), with the keys after the declared ones as the list
/// `K.<more_keys>`.
pub fn lua_preamble(layout: &Layout) -> String {
    let keys: Vec<String> = layout
        .keys
        .iter()
        .enumerate()
        .map(|(i, slot)| format!("{} = KEYS[{}]", lua_name(slot), i + 1))
        .collect();
    let mut out = format!("local K = {{{}}}\n", keys.join(", "));
    if let Some(more) = layout.more_keys {
        out.push_str(&format!(
            "K.{more} = {{}}\nfor i = {}, #KEYS do K.{more}[#K.{more} + 1] = KEYS[i] end\n",
            layout.keys.len() + 1
        ));
    }
    out
}

/// A script's body with its argument names resolved: `A.<arg>` becomes
/// `ARGV[<its position>]`, `REST` the position of the first argument after
/// the head, and `<RECORD>.<field>` (and `<RECORD>.SIZE`) the field's
/// offset (the record's length) as a number. Resolved when the scripts are
/// built, so reading an argument by name costs a script nothing more than
/// reading it by position. A name the layout does not declare is an error.
pub fn resolve_names(layout: &Layout, body: &str) -> Result<String, String> {
    static NAMES: LazyLock<Option<regex::Regex>> = LazyLock::new(|| {
        regex::Regex::new(r"\b(A|[A-Z][A-Z_]*)\.([A-Za-z_][A-Za-z0-9_]*)\b|\bREST\b").ok()
    });
    let names = NAMES
        .as_ref()
        .ok_or("the pattern of argument names does not compile")?;
    let mut unknown = Vec::new();
    let out = names.replace_all(body, |c: &regex::Captures| {
        let (Some(table), Some(field)) = (c.get(1), c.get(2)) else {
            return (layout.args.len() + 1).to_string();
        };
        let (table, field) = (table.as_str(), field.as_str());
        let found = if table == "A" {
            position(layout.args, field).map(|i| format!("ARGV[{}]", i + 1))
        } else {
            match layout.tail.iter().find(|r| r.lua == table) {
                Some(record) if field == "SIZE" => Some(record.fields.len().to_string()),
                Some(record) => position(record.fields, field).map(|i| i.to_string()),
                // Another upper-case table (STAT.X, generated apart).
                None => return c[0].to_string(),
            }
        };
        found.unwrap_or_else(|| {
            unknown.push(format!("{table}.{field}"));
            c[0].to_string()
        })
    });
    if unknown.is_empty() {
        Ok(out.into_owned())
    } else {
        Err(format!(
            "script {} reads {} that its layout in protocol.rs does not declare",
            layout.name,
            unknown.join(", ")
        ))
    }
}

fn position(names: &[&str], name: &str) -> Option<usize> {
    names.iter().position(|n| *n == name)
}

// The records.

wire! {
    /// One page of a commit: what every page carries (followed by its
    /// [`PageRareRecord`] when it has one, then its tasks, links and items).
    PageRecord {
        /// The leased request's id.
        id,
        /// How many links, items and tasks follow.
        n_links, n_items, n_tasks,
        /// The largest depth of its new requests.
        depth,
        /// What the response said of its host: 'slow', 'error', 'ok' or ''.
        host_outcome,
        /// Requests to lease to replace it.
        lease_next,
        /// Its request's host (its politeness key; '' if unknown).
        host,
        /// '1' when a [`PageRareRecord`] follows, '0' when the page has
        /// none of what it holds.
        rare,
    }
}

wire! {
    /// What few pages have: a dead letter, a failure, a retry, a slow
    /// host's Retry-After, a revisit. Sent only for the pages that have
    /// one of them: every argument costs Redis about 900 instructions to
    /// read and free, and these ten, mostly empty, were 2 % of what a
    /// page cost Redis.
    PageRareRecord {
        /// A dead letter's JSON, or ''.
        dead,
        /// A failed request's JSON, or ''.
        failed,
        /// The retry's delay (ms; -1: no retry), its request and priority.
        retry_ms, retry_json, retry_priority,
        /// The Retry-After of a 'slow' response (ms).
        slow_ms,
        /// 'at' (schedule the page again), 'drop' (take it off) or ''.
        revisit,
        /// The page's fingerprint, ms until it is due, the request that
        /// fetches it again.
        revisit_fp, revisit_ms, revisit_json,
    }
}

wire! {
    /// A link a page hands to another spider, or in a sharded spider to
    /// another shard.
    TaskRecord {
        /// Which spider or outbox (its number among the commit's
        /// handoffs, from 1).
        spider,
        fingerprint, priority,
        /// The task's JSON, for the spider's start key; for a shard, the
        /// request's.
        entry,
        /// For a shard, a request without fingerprint: a token no other
        /// hand-off has, which its shard remembers (see `outbox_deliver`);
        /// '' otherwise.
        token,
    }
}

wire! {
    /// A request a page queues.
    LinkRecord {
        /// Its fingerprint ('' for dont_filter).
        fingerprint,
        priority,
        json,
    }
}

wire! {
    /// A request handed to another shard's outbox (`outbox_push`).
    OutboxRecord {
        /// For a request without fingerprint, its token (see
        /// `TaskRecord::token`); '' otherwise.
        token,
        fingerprint, priority, json,
    }
}

wire! {
    /// A spider a commit hands links to.
    HandoffRecord {
        /// Its start key's type.
        kind,
        /// Its wake channel.
        wake,
    }
}

wire! {
    /// A stat increment of a commit (its pages' summed).
    StatRecord { field, delta }
}

wire! {
    /// A start entry to claim.
    ClaimRecord {
        /// The entry as read.
        entry,
        /// 'req' (queue `json`), 'dead' (set `json` aside), or in a
        /// sharded spider the place (from 1) of the outbox `json` goes to.
        outcome,
        /// A request's fingerprint ('' for dont_filter), or a dead
        /// letter's extra stat ('' for none).
        fingerprint_or_stat,
        priority,
        json,
        /// For an outbox, a request without fingerprint: its token (see
        /// `TaskRecord::token`); '' otherwise.
        token,
    }
}

wire! {
    /// A spider upstream of the one whose status is read (see
    /// `frontier::pipeline`).
    ChainRecord {
        /// Its start key's type.
        start_kind,
    }
}

wire! {
    /// The keys of an upstream in a status call (`K.chain`, this many
    /// per upstream, in this order: `CHAIN_KEY.requests` is an offset).
    ChainKeys { start_urls, requests, inflight, delayed, control, upstreams, workers }
}

wire! {
    /// A failed request to queue again.
    RequeueRecord {
        /// The failed entry as read.
        entry,
        priority,
        json,
    }
}

wire! {
    /// A seed to queue once per crawl.
    SeedRecord { url, json }
}

wire! {
    /// An entry to set aside (its bytes as stored: it is not UTF-8 text).
    AsideRecord: bytes {
        /// The entry as stored.
        entry,
        /// Its dead letter's JSON.
        letter,
    }
}

wire! {
    /// An entry of a scrapy-redis queue to convert (bytes: an entry is a
    /// pickle).
    ImportRecord: bytes {
        /// The entry as stored.
        entry,
        /// 'req' (queue `json`), 'dead' (set `json` aside), or in a
        /// sharded spider the place (from 1) of the outbox `json` goes to.
        outcome,
        priority,
        /// The request's JSON, or the dead letter's.
        json,
        /// For an outbox, the request's token (see `TaskRecord::token`);
        /// '' otherwise.
        token,
    }
}

pub static PAGE: Record = Record {
    lua: "PAGE",
    fields: PageRecord::FIELDS,
};
pub static PAGE_RARE: Record = Record {
    lua: "PAGE_RARE",
    fields: PageRareRecord::FIELDS,
};
pub static TASK: Record = Record {
    lua: "TASK",
    fields: TaskRecord::FIELDS,
};
pub static LINK: Record = Record {
    lua: "LINK",
    fields: LinkRecord::FIELDS,
};
pub static OUTBOX: Record = Record {
    lua: "OUTBOX",
    fields: OutboxRecord::FIELDS,
};
pub static HANDOFF: Record = Record {
    lua: "HANDOFF",
    fields: HandoffRecord::FIELDS,
};
pub static STAT_PAIR: Record = Record {
    lua: "STAT_PAIR",
    fields: StatRecord::FIELDS,
};
pub static CLAIM: Record = Record {
    lua: "CLAIM",
    fields: ClaimRecord::FIELDS,
};
pub static REQUEUE: Record = Record {
    lua: "REQUEUE",
    fields: RequeueRecord::FIELDS,
};
pub static CHAIN: Record = Record {
    lua: "CHAIN",
    fields: ChainRecord::FIELDS,
};
pub static CHAIN_KEY: Record = Record {
    lua: "CHAIN_KEY",
    fields: ChainKeys::FIELDS,
};
pub static SEED: Record = Record {
    lua: "SEED",
    fields: SeedRecord::FIELDS,
};
pub static ASIDE: Record = Record {
    lua: "ASIDE",
    fields: AsideRecord::FIELDS,
};

pub static IMPORT: Record = Record {
    lua: "IMPORT",
    fields: ImportRecord::FIELDS,
};

/// A record or a list of plain values (ids, entries, fingerprints).
pub static VALUE: Record = Record {
    lua: "VALUE",
    fields: &["value"],
};

// The head arguments of each script.

wire! {
    /// `lease.lua`.
    LeaseArgs {
        worker, wake, lease_ms, max, start_kind, peek, interval_ms, jitter, max_wait_ms, max_pages,
        quota_shard, max_per_host, max_lease_expiries, sink, held, takes_handed, visit,
    }
}

wire! {
    /// `commit.lua`.
    CommitArgs {
        worker, wake, lease_ms, interval_ms, jitter, backoff_max_ms, max_wait_ms, dupe_spec,
        handoffs, max_pages, quota_shard, max_per_host, max_lease_expiries, release, pages,
        stat_pairs, sink, held, visit,
    }
}

wire! {
    /// `links_ahead.lua`: the page's lease (its request's id), and the
    /// largest depth of its links.
    LinksAheadArgs { worker, id, wake, dupe_spec, depth }
}

wire! {
    /// `outbox_take.lua`: the mover's token (unique to this move), how
    /// long its lock lasts, and how many entries to read at most.
    OutboxTakeArgs { mover, lock_ms, max }
}

wire! {
    /// `outbox_deliver.lua`: the outbox the entries come from (named in
    /// dead letters), the mover delivering them (counted in the crew's
    /// fair share when waking workers), the wake channel and the
    /// dupefilter.
    OutboxDeliverArgs { outbox, mover, wake, dupe_spec, handoff_spiders }
}

wire! {
    /// `upstream_shard.lua`: the start key's type, how recent a live
    /// worker's heartbeat is (ms), and '1' for shard 0 (which reads the
    /// start key, the upstreams hash and the workers).
    UpstreamShardArgs { start_kind, live_ms, whole }
}

wire! {
    /// `handoff_deliver.lua`: the hand-off outbox the entries come from
    /// (named in dead letters), the other spider's start key's type and
    /// its wake channel.
    HandoffDeliverArgs { outbox, start_kind, wake }
}

wire! {
    /// `outbox_trim.lua`: the mover's token, and how many entries it read.
    OutboxTrimArgs { mover, count }
}

wire! {
    /// `quota_give.lua`: the limit and this shard's place (see
    /// `LeaseArgs`), the shard given to, the most to give, the move's
    /// token.
    QuotaGiveArgs { max_pages, quota_shard, to, want, token }
}

wire! {
    /// `quota_take.lua`: the limit and this shard's place, the move's
    /// token and amount, the spider's wake channel.
    QuotaTakeArgs { max_pages, quota_shard, token, amount, wake }
}

wire! {
    /// `record_shards.lua`: the spider's shard count, and who records it
    /// ('join', 'probe' or 'takeover').
    RecordShardsArgs { shards, mode }
}

wire! {
    /// `claim_start.lua`.
    ClaimArgs { start_kind, wake, dupe_spec }
}

wire! {
    /// `renew.lua`.
    RenewArgs { worker, lease_ms }
}

wire! {
    /// `release.lua`: whose leases, and the channel its waiting peers
    /// are woken on.
    ReleaseArgs { worker, wake }
}

wire! {
    /// `status.lua`: with how recent an upstream's worker's heartbeat
    /// must be for it to count as live.
    StatusArgs { start_kind, dupe_spec, sink, live_ms }
}

wire! {
    /// `push_start.lua`.
    PushArgs { start_kind, limit, score, wake }
}

wire! {
    /// `requeue_failed.lua`.
    RequeueArgs { wake }
}

wire! {
    /// `pace.lua`.
    PaceArgs { host, interval_ms, jitter, spacing_ms, hold_ms, limit_ms }
}

wire! {
    /// `robots_lock.lua`.
    RobotsLockArgs { host, ttl_ms }
}

wire! {
    /// `session_lock.lua`.
    SessionLockArgs { seen, holder, ttl_ms }
}

wire! {
    /// `session_store.lua`: `ok` is 1 for a login that worked, `seen` the
    /// generation it replaces, `keep_lock` 1 to write the history only.
    SessionStoreArgs { holder, ok, cookie, account, accounts, seen, keep_lock }
}

wire! {
    /// `session_stale.lua`.
    SessionStaleArgs { generation }
}

wire! {
    /// `flush.lua`: the dupefilter's keys, whose followers go too.
    FlushArgs { dupefilter, dupefilter_meta }
}

wire! {
    /// `leases.lua`.
    NoArgs {}
}

wire! {
    /// `dupe_bulk.lua`: `add`, `check` or `forget`.
    DupeBulkArgs { dupe_spec, op }
}

wire! {
    /// `dupe_prepare.lua` and `dupe_info.lua`.
    DupeArgs { dupe_spec }
}

wire! {
    /// `bloom_grow.lua`: the share (per mille) of maxmemory, or of the
    /// machine's memory, that Redis's used memory may reach.
    BloomGrowArgs { dupe_spec, headroom_permille }
}

wire! {
    /// `seed.lua`.
    SeedArgs { wake }
}

wire! {
    /// `import_stage.lua`: entries moved per call, and the rank a zset's
    /// scan goes on from.
    ImportStageArgs { batch, from }
}

wire! {
    /// `import_retry.lua`: the dead letter as stored, and the entry it
    /// kept.
    ImportRetryArgs: bytes { letter, entry }
}

wire! {
    /// `import_queue.lua`: the type of the entries' key ('list' or
    /// 'zset').
    ImportArgs { kind, wake }
}

wire! {
    /// `sweep.lua`.
    SweepArgs { budget, backoff_idle_ms, robots_ttl_ms, workers_keep_ms }
}

wire! {
    /// `set_aside.lua`: where the entries are ('list', 'set', 'zset' or
    /// 'lease') and, for leases, whose.
    AsideArgs { kind, worker }
}

wire! {
    /// `export_take.lua`: `fresh` is '1' for an exporter's first take (or
    /// its first after it was found gone).
    ExportTakeArgs { exporter, lease_ms, max, fresh }
}

wire! {
    /// `export_ack.lua`: `sink` is 'list' or 'stream'; `whole` is '1' for
    /// a sink that must acknowledge all of its records or none.
    ExportAckArgs { exporter, sink, group, lease_ms, whole }
}

wire! {
    /// What `export_ack.lua` acknowledges, one record each.
    ExportAckRecord { what, id, value }
}

wire! {
    /// `export_reclaim.lua`.
    ExportReclaimArgs { exporter, forget_ms }
}

wire! {
    /// `export_beat.lua`.
    ExportBeatArgs { exporter, lease_ms, fresh }
}

pub static ACK: Record = Record {
    lua: "ACK",
    fields: ExportAckRecord::FIELDS,
};

use KeyKind as Kk;
use Slot::Kind as K;

/// The layouts of `crawlworker export`'s steps (see `export.rs`).
fn export_layouts() -> Vec<Layout> {
    vec![
        layout(
            "export_take",
            vec![K(Kk::Items), K(Kk::Exporters), Slot::Chosen("exporting")],
            ExportTakeArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "export_ack",
            vec![
                K(Kk::Exporters),
                K(Kk::ItemStream),
                K(Kk::ItemsDead),
                K(Kk::Stats),
                Slot::Chosen("exporting"),
                Slot::Chosen("renames"),
            ],
            ExportAckArgs::FIELDS,
            vec![&ACK],
        ),
        layout(
            "export_reclaim",
            vec![
                K(Kk::Items),
                K(Kk::Exporters),
                K(Kk::Stats),
                Slot::Chosen("exporting"),
            ],
            ExportReclaimArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "export_beat",
            vec![K(Kk::Exporters)],
            ExportBeatArgs::FIELDS,
            Vec::new(),
        ),
    ]
}

/// The keys a leasing script needs (`lease_requests` and `next_due` in
/// the helpers read them).
fn leasing_keys() -> Vec<Slot> {
    vec![
        K(Kk::Requests),
        K(Kk::RequestData),
        K(Kk::Inflight),
        K(Kk::Leases),
        K(Kk::Dead),
        K(Kk::Stats),
        K(Kk::Delayed),
        K(Kk::DelayedScores),
        K(Kk::Pace),
        K(Kk::HostDelay),
        K(Kk::Backoff),
        K(Kk::Parked),
        K(Kk::ParkedHosts),
        K(Kk::Sequence),
        K(Kk::Schedule),
        K(Kk::ScheduleData),
        K(Kk::ScheduleDue),
        K(Kk::Control),
        K(Kk::HostPages),
        K(Kk::Crew),
        K(Kk::Waiting),
    ]
}

fn with(mut keys: Vec<Slot>, more: &[Slot]) -> Vec<Slot> {
    keys.extend_from_slice(more);
    keys
}

/// A layout with no keys after the declared ones.
fn layout(
    name: &'static str,
    keys: Vec<Slot>,
    args: &'static [&'static str],
    tail: Vec<&'static Record>,
) -> Layout {
    Layout {
        name,
        keys,
        more_keys: None,
        args,
        tail,
    }
}

/// Every script's layout.
pub fn layouts() -> Vec<Layout> {
    [
        queue_layouts(),
        outbox_layouts(),
        admin_layouts(),
        host_layouts(),
        session_layouts(),
        export_layouts(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The layouts of the scripts a crawl runs by: leasing, committing,
/// claiming start entries, renewing and releasing leases, the status.
fn queue_layouts() -> Vec<Layout> {
    vec![
        layout(
            "lease",
            with(leasing_keys(), &[K(Kk::Start), Slot::Items]),
            LeaseArgs::FIELDS,
            Vec::new(),
        ),
        Layout {
            more_keys: Some("handoff_starts"),
            ..layout(
                "commit",
                with(
                    leasing_keys(),
                    &[
                        K(Kk::Dupefilter),
                        Slot::Items,
                        K(Kk::Failed),
                        K(Kk::DupefilterMeta),
                        K(Kk::BackoffErrors),
                    ],
                ),
                CommitArgs::FIELDS,
                vec![
                    &HANDOFF, &STAT_PAIR, &PAGE, &PAGE_RARE, &TASK, &LINK, &VALUE,
                ],
            )
        },
        links_ahead_layout(),
        Layout {
            more_keys: Some("outboxes"),
            ..layout(
                "claim_start",
                vec![
                    K(Kk::Start),
                    K(Kk::Requests),
                    K(Kk::RequestData),
                    K(Kk::Dupefilter),
                    K(Kk::Sequence),
                    K(Kk::Dead),
                    K(Kk::Stats),
                    K(Kk::DupefilterMeta),
                    K(Kk::Waiting),
                ],
                ClaimArgs::FIELDS,
                vec![&CLAIM],
            )
        },
        layout(
            "renew",
            vec![K(Kk::Inflight), K(Kk::Leases)],
            RenewArgs::FIELDS,
            vec![&VALUE],
        ),
        layout(
            "release",
            vec![
                K(Kk::Requests),
                K(Kk::Inflight),
                K(Kk::Leases),
                K(Kk::RequestData),
                K(Kk::HostPages),
                K(Kk::Waiting),
            ],
            ReleaseArgs::FIELDS,
            vec![&VALUE],
        ),
        Layout {
            more_keys: Some("chain"),
            ..layout(
                "status",
                vec![
                    K(Kk::Start),
                    K(Kk::Requests),
                    K(Kk::Inflight),
                    K(Kk::Dead),
                    K(Kk::Failed),
                    K(Kk::Dupefilter),
                    Slot::Items,
                    K(Kk::Delayed),
                    K(Kk::DupefilterMeta),
                    K(Kk::Schedule),
                    K(Kk::ScheduleDue),
                    K(Kk::Control),
                    K(Kk::Upstreams),
                ],
                StatusArgs::FIELDS,
                vec![&CHAIN, &CHAIN_KEY],
            )
        },
    ]
}

/// The layout of the script that queues a page's links ahead of its
/// commit.
fn links_ahead_layout() -> Layout {
    layout(
        "links_ahead",
        vec![
            K(Kk::Leases),
            K(Kk::Dupefilter),
            K(Kk::DupefilterMeta),
            K(Kk::Stats),
            K(Kk::Requests),
            K(Kk::RequestData),
            K(Kk::Sequence),
            K(Kk::Inflight),
            K(Kk::Crew),
            K(Kk::Waiting),
        ],
        LinksAheadArgs::FIELDS,
        vec![&LINK],
    )
}

/// The layouts of the scripts that hand requests between a sharded
/// spider's shards (see `scripts/lib/outbox.lua`). An outbox and its lock
/// are chosen by the caller: a shard has one per other shard.
fn outbox_layouts() -> Vec<Layout> {
    let outbox = || vec![Slot::Chosen("outbox"), Slot::Chosen("outbox_lock")];
    vec![
        layout(
            "outbox_push",
            vec![Slot::Chosen("outbox")],
            NoArgs::FIELDS,
            vec![&OUTBOX],
        ),
        layout("outbox_take", outbox(), OutboxTakeArgs::FIELDS, Vec::new()),
        Layout {
            more_keys: Some("handoffs"),
            ..layout(
                "outbox_deliver",
                vec![
                    K(Kk::Inbox),
                    K(Kk::Dupefilter),
                    K(Kk::DupefilterMeta),
                    K(Kk::Stats),
                    K(Kk::Requests),
                    K(Kk::RequestData),
                    K(Kk::Sequence),
                    K(Kk::Inflight),
                    K(Kk::Crew),
                    K(Kk::Waiting),
                    K(Kk::Dead),
                ],
                OutboxDeliverArgs::FIELDS,
                vec![&VALUE],
            )
        },
        // A sharded upstream's shard, read by the spider downstream.
        Layout {
            more_keys: Some("outboxes"),
            ..layout(
                "upstream_shard",
                vec![
                    Slot::Chosen("start_urls"),
                    Slot::Chosen("requests"),
                    Slot::Chosen("inflight"),
                    Slot::Chosen("delayed"),
                    Slot::Chosen("control"),
                    Slot::Chosen("upstreams"),
                    Slot::Chosen("workers"),
                    Slot::Chosen("sequence"),
                ],
                UpstreamShardArgs::FIELDS,
                Vec::new(),
            )
        },
        // The other spider's keys, all in its slot.
        layout(
            "handoff_deliver",
            vec![
                Slot::Chosen("start"),
                Slot::Chosen("inbox"),
                Slot::Chosen("control"),
                Slot::Chosen("waiting"),
                Slot::Chosen("dead"),
                Slot::Chosen("stats"),
            ],
            HandoffDeliverArgs::FIELDS,
            vec![&VALUE],
        ),
        layout("outbox_trim", outbox(), OutboxTrimArgs::FIELDS, Vec::new()),
        layout(
            "quota_give",
            vec![
                K(Kk::Control),
                K(Kk::Stats),
                K(Kk::Inflight),
                K(Kk::Requests),
            ],
            QuotaGiveArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "quota_take",
            vec![K(Kk::Control), K(Kk::Inbox)],
            QuotaTakeArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "record_shards",
            vec![
                K(Kk::Control),
                K(Kk::Requests),
                K(Kk::RequestData),
                K(Kk::ScrapyQueue),
                K(Kk::Inflight),
                K(Kk::Delayed),
                K(Kk::Schedule),
                K(Kk::Dupefilter),
            ],
            RecordShardsArgs::FIELDS,
            Vec::new(),
        ),
    ]
}

/// The layouts of the operator's scripts: pushing and re-queueing, flush,
/// the leases held, the dupefilter's, the seeds, importing a scrapy-redis
/// queue.
fn admin_layouts() -> Vec<Layout> {
    vec![
        layout(
            "push_start",
            vec![K(Kk::Start)],
            PushArgs::FIELDS,
            vec![&VALUE],
        ),
        layout(
            "requeue_failed",
            vec![
                K(Kk::Failed),
                K(Kk::Requests),
                K(Kk::RequestData),
                K(Kk::Dupefilter),
                K(Kk::Sequence),
                K(Kk::Stats),
            ],
            RequeueArgs::FIELDS,
            vec![&REQUEUE],
        ),
        Layout {
            more_keys: Some("targets"),
            ..layout("flush", Vec::new(), FlushArgs::FIELDS, Vec::new())
        },
        layout(
            "leases",
            vec![K(Kk::Inflight), K(Kk::Leases)],
            NoArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "dupe_bulk",
            vec![K(Kk::Dupefilter), K(Kk::DupefilterMeta)],
            DupeBulkArgs::FIELDS,
            vec![&VALUE],
        ),
        layout(
            "dupe_prepare",
            vec![K(Kk::Dupefilter), K(Kk::DupefilterMeta)],
            DupeArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "dupe_info",
            vec![K(Kk::Dupefilter), K(Kk::DupefilterMeta)],
            DupeArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "bloom_grow",
            vec![K(Kk::Dupefilter), K(Kk::DupefilterMeta)],
            BloomGrowArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "seed",
            vec![
                K(Kk::Seeds),
                K(Kk::Requests),
                K(Kk::RequestData),
                K(Kk::Sequence),
                K(Kk::Stats),
            ],
            SeedArgs::FIELDS,
            vec![&SEED],
        ),
        layout(
            "import_stage",
            vec![K(Kk::Requests), K(Kk::RequestData), K(Kk::ScrapyQueue)],
            ImportStageArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "import_retry",
            vec![K(Kk::Dead), K(Kk::ScrapyQueue)],
            ImportRetryArgs::FIELDS,
            Vec::new(),
        ),
        Layout {
            more_keys: Some("outboxes"),
            ..layout(
                "import_queue",
                vec![
                    K(Kk::ScrapyQueue),
                    K(Kk::Requests),
                    K(Kk::RequestData),
                    K(Kk::Sequence),
                    K(Kk::Dead),
                    K(Kk::Stats),
                ],
                ImportArgs::FIELDS,
                vec![&IMPORT],
            )
        },
    ]
}

/// The layouts of the login session's steps.
fn session_layouts() -> Vec<Layout> {
    let keys = || vec![K(Kk::Session), K(Kk::SessionLock)];
    vec![
        layout("session_lock", keys(), SessionLockArgs::FIELDS, Vec::new()),
        layout(
            "session_store",
            keys(),
            SessionStoreArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "session_stale",
            vec![K(Kk::Session)],
            SessionStaleArgs::FIELDS,
            Vec::new(),
        ),
    ]
}

/// The layouts of the per-host scripts (a slot, a robots.txt lock, the
/// sweep) and of setting entries aside.
fn host_layouts() -> Vec<Layout> {
    vec![
        layout(
            "pace",
            vec![K(Kk::Pace), K(Kk::HostDelay), K(Kk::Backoff)],
            PaceArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "robots_lock",
            vec![K(Kk::RobotsLocks)],
            RobotsLockArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "sweep",
            vec![
                K(Kk::Pace),
                K(Kk::HostDelay),
                K(Kk::Backoff),
                K(Kk::BackoffErrors),
                K(Kk::Sweep),
                K(Kk::Robots),
                K(Kk::RobotsExpiry),
                K(Kk::RobotsLocks),
                K(Kk::Workers),
                K(Kk::Upstreams),
                K(Kk::Crew),
            ],
            SweepArgs::FIELDS,
            Vec::new(),
        ),
        layout(
            "set_aside",
            vec![
                Slot::Chosen("source"),
                K(Kk::Dead),
                K(Kk::Stats),
                K(Kk::RequestData),
                K(Kk::Leases),
            ],
            AsideArgs::FIELDS,
            vec![&ASIDE],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_to_positions_and_undeclared_ones_are_refused() {
        let layout = Layout {
            name: "t",
            keys: vec![Slot::Kind(KeyKind::Requests)],
            more_keys: None,
            args: &["worker", "max"],
            tail: vec![&LINK],
        };
        let body = "local w, m = A.worker, A.max\nfor i = REST, #ARGV, LINK.SIZE do x(ARGV[i + LINK.json], STAT.X) end";
        assert_eq!(
            resolve_names(&layout, body).unwrap(),
            "local w, m = ARGV[1], ARGV[2]\nfor i = 3, #ARGV, 3 do x(ARGV[i + 2], STAT.X) end"
        );
        let e = resolve_names(&layout, "A.workr + LINK.jsn").unwrap_err();
        assert!(e.contains("A.workr") && e.contains("LINK.jsn"), "{e}");
    }

    #[test]
    fn every_script_body_resolves_against_its_layout() {
        for layout in layouts() {
            let body = super::super::scripts::body(layout.name);
            if let Err(e) = resolve_names(&layout, body) {
                panic!("{e}");
            }
        }
    }
}
