//! Every Redis key of a spider, in one place: its kind, default name, type,
//! what it holds and which `flush` group it belongs to. Defaults are
//! scrapy-redis's (`<name>:requests`, `<name>:dupefilter`, `<name>:items`,
//! `<name>:stats`, `<name>:start_urls`) plus crawlworker's own; each can be
//! renamed in the spider's `[keys]` table with a `{name}` template (the
//! start key in `[start] key`). In cluster mode every key carries the hash
//! tag `{<name>}` so all keys of a spider share one Redis Cluster slot and
//! multi-key scripts work; spiders that hand work to each other share a tag
//! (`[keys] hash_tag`), so their keys are `{<tag>}<name>:…`.
//!
//! The spider compiler resolves a spider's [`Keys`] here when it loads the
//! file; the rest of the crate asks the frontier for keys by kind and never
//! spells a key name itself.

/// How a spider's keys are named.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum KeyMode {
    /// `<name>:requests`, …
    #[default]
    Plain,
    /// `{<name>}:requests`, …: the spider's name is the hash tag.
    Cluster,
}

/// The Redis type of the start key, as written in `[start] type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartKind {
    List,
    Set,
    Zset,
}

impl StartKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StartKind::List => "list",
            StartKind::Set => "set",
            StartKind::Zset => "zset",
        }
    }
}

/// Where a spider's items go, as written in `[items] sink`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ItemSink {
    /// RPUSH to the `items` list, as scrapy-redis's RedisPipeline (the
    /// default).
    #[default]
    List,
    /// XADD to the `item_stream` stream, for consumer groups.
    Stream,
}

impl ItemSink {
    /// The name in `[items] sink` and in the commit script's arguments.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemSink::List => "list",
            ItemSink::Stream => "stream",
        }
    }

    /// The kind of key it writes to.
    pub fn key_kind(self) -> KeyKind {
        match self {
            ItemSink::List => KeyKind::Items,
            ItemSink::Stream => KeyKind::ItemStream,
        }
    }
}

/// What `flush` deletes together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyGroup {
    /// The start key.
    StartUrls,
    /// The queue, leases, waiting retries and the sequence.
    Requests,
    /// Per-host politeness: next slots, Crawl-delays, back-off, robots.txt.
    Politeness,
    Dupefilter,
    Items,
    Stats,
    /// Dead letters and failed requests.
    Dead,
    /// Pages to fetch again (`revisit`), with the requests that fetch them.
    Schedule,
    /// Crawl control: paused or not, quotas reached, pages per host.
    Control,
    /// Worker heartbeats, and the hand-off relations workers record.
    Workers,
    /// Not a key: a pub/sub channel, nothing to delete.
    Channel,
}

macro_rules! key_kinds {
    ($( $(#[doc = $doc:literal])+ $variant:ident, $field:ident = $template:literal, $ty:literal, $group:ident; )+) => {
        /// A kind of key every spider has.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum KeyKind {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl KeyKind {
            /// Every kind, in the order `stats` and the README list them.
            pub const ALL: &'static [KeyKind] = &[$(KeyKind::$variant),+];

            /// The kind's name in `[keys]` and in `stats --json`.
            pub fn name(self) -> &'static str {
                match self { $(KeyKind::$variant => stringify!($field)),+ }
            }

            /// The default name template (`{name}` is the spider's name).
            pub fn template(self) -> &'static str {
                match self { $(KeyKind::$variant => $template),+ }
            }

            /// The Redis type of the key.
            pub fn redis_type(self) -> &'static str {
                match self { $(KeyKind::$variant => $ty),+ }
            }

            /// What the key holds.
            pub fn doc(self) -> &'static str {
                match self { $(KeyKind::$variant => concat!($($doc),+).trim_ascii()),+ }
            }

            pub fn group(self) -> KeyGroup {
                match self { $(KeyKind::$variant => KeyGroup::$group),+ }
            }

            /// The kind named `name` in `[keys]`.
            pub fn parse(name: &str) -> Option<KeyKind> {
                KeyKind::ALL.iter().copied().find(|k| k.name() == name)
            }
        }

        /// The resolved key names of one spider.
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct Keys {
            $( $(#[doc = $doc])+ pub $field: String, )+
        }

        impl Keys {
            /// The key of `kind`.
            pub fn get(&self, kind: KeyKind) -> &str {
                match kind { $(KeyKind::$variant => &self.$field),+ }
            }

            fn build(name: impl Fn(KeyKind) -> String) -> Keys {
                Keys { $( $field: name(KeyKind::$variant), )+ }
            }
        }
    };
}

key_kinds! {
    /// Start entries: URLs or JSON tasks (`[start] key` and `type`).
    Start, start_urls = "{name}:start_urls", "list, set or zset", StartUrls;
    /// Queued request ids, scored by priority then FIFO.
    Requests, requests = "{name}:requests", "zset", Requests;
    /// Request id → request JSON; one whose lease expired (its worker died or vanished holding it) leads with the count, `{"lease_expiries":1,…`, which sets it aside at `max_lease_expiries`.
    RequestData, request_data = "{name}:requests:data", "hash", Requests;
    /// Counter giving request ids and FIFO order.
    Sequence, sequence = "{name}:requests:seq", "string", Requests;
    /// The parked requests, per host in queue order: members `<host> <queue place> <id>` of score 0, read by host with ZRANGEBYLEX. A request whose host's next politeness slot is out of a lease's reach (a slow or backed-off host's backlog) stays in `requests`, but at the score 8e15, behind every other, until its host's turn puts it back at its place (see `docs/frontier.md`).
    Parked, parked = "{name}:requests:parked", "zset", Requests;
    /// Host with parked requests → its next turn (ms): then its next parked requests go back to their queue places, as many as its slots within `max_wait` (up to 16).
    ParkedHosts, parked_hosts = "{name}:requests:parked:hosts", "zset", Requests;
    /// The requests a scrapy-redis crawl had queued (pickles, as scrapy-redis left them: a zset, or a list for its FIFO and LIFO queues), moved here by `import-queue` and taken out one by one as each becomes a queued request or a dead letter; gone once the import is done.
    ScrapyQueue, scrapy_queue = "{name}:requests:scrapy_redis", "zset or list", Requests;
    /// Leased request id → lease deadline (ms, Redis clock).
    Inflight, inflight = "{name}:inflight", "zset", Requests;
    /// Leased request id → worker and queue score; plus one note, field `~`, whose long value keeps Redis from packing the hash as a listpack (lease look-ups stay O(1)).
    Leases, leases = "{name}:inflight:owners", "hash", Requests;
    /// Worker id → until when (ms) it counts as crawling: each of its leases and commits renews it for a `lease_timeout` (a commit leaves a place with nine tenths of that still to run as it is); a sharded spider's worker renews only its home shard's (see `docs/scaling.md`). A worker leases at most its fair share (the queue and the leases divided among these workers) minus what it holds.
    Crew, crew = "{name}:inflight:workers", "zset", Requests;
    /// Worker id → how many requests its last lease asked for and did not get (up to its fair share), then `|h` when its wake-up subscription was confirmed, then, for a sharded spider's worker visiting this shard (not in its crew, see `docs/scaling.md`), `@` and until when (ms) the note holds, a `lease_timeout` after its lease; a commit that queues more than it leases leases the new work to as many of these as can use it and hands each its leases on `{name}:wake:<worker id>` (one without `|h` is woken to lease), and forgets those it satisfied; a release (requests a worker hands back) wakes as many of these as the requests can use, each on its own channel, to lease them; a commit of another spider that hands this one tasks (`to_spider`) wakes as many of these as the tasks can use, each on its own channel, to claim them.
    Waiting, waiting = "{name}:inflight:waiting", "hash", Requests;
    /// In a sharded spider (see `docs/scaling.md`): the token of each request without fingerprint that another shard handed this one (through its outbox, `<its requests key>:outbox:<this shard>`) → when this shard queued it (ms); a mover that delivers it again is skipped by it. Kept a day. Also, in a spider a sharded spider hands work to, the token of each task its movers delivered (from a shard's hand-off outbox, `<its requests key>:handoff:<this spider>`), for the same reason.
    Inbox, inbox = "{name}:requests:inbox", "zset", Requests;
    /// Request id waiting to be retried → due time (ms).
    Delayed, delayed = "{name}:delayed", "zset", Requests;
    /// Waiting retry id → its queue score.
    DelayedScores, delayed_scores = "{name}:delayed:scores", "hash", Requests;
    /// Page fingerprint → when it is next due (ms), for pages a `revisit` rule schedules.
    Schedule, schedule = "{name}:schedule", "zset", Schedule;
    /// Page fingerprint → the request JSON that fetches it again.
    ScheduleData, schedule_data = "{name}:schedule:data", "hash", Schedule;
    /// Page fingerprint → the due time of a revisit queued but not yet fetched (overdue).
    ScheduleDue, schedule_due = "{name}:schedule:due", "zset", Schedule;
    /// Seed URL (`[start] sitemap` and `feed`) → when it was queued (ms): each is queued once per crawl.
    Seeds, seeds = "{name}:schedule:seeds", "hash", Schedule;
    /// Crawl control: `paused` (since when, ms) set by `crawlworker pause`, `max_pages_reached` (when, ms), and for a sharded spider (shard 0's) `shards`, the shard count its crawl runs over, and `homes`, the home shards handed to its workers so far (each worker's is that count modulo the shards), and (each shard's, with `max_pages`) `quota_cap` and `quota_max`, the shard's cap of the limit and the limit it was made for, and `quota_out:<shard>:<token>`, a move of the cap to another shard not finished yet; `handoffs_in`, how many tasks the movers of a sharded spider handing work to this one delivered to its start key.
    Control, control = "{name}:control", "hash", Control;
    /// The login session the workers share (`[session]`): its cookies, generation, account, when it was made, whether it was seen logged out, the login count and the accounts' login history (their rests and why, and the logins of `crawlworker parse --redis` too). **A secret**: its `cookie` field logs anyone in as the account; keep this key (and Redis) as private as the password, and never copy it into a ticket or a log.
    Session, session = "{name}:session", "hash", Control;
    /// The worker (or `crawlworker parse --redis`) logging in right now, until the lock's deadline (`login_timeout`, a PX expiry: a worker killed mid-login locks nobody out for longer).
    SessionLock, session_lock = "{name}:session:lock", "string", Control;
    /// Host → pages leased, for `max_pages_per_host`; written only while that cap is set (it is the cap's record of every host it counted).
    HostPages, host_pages = "{name}:control:hosts", "hash", Control;
    /// Host → next free politeness slot (ms), for the whole cluster; swept once in the past (with back-off, once the host is left alone).
    Pace, pace = "{name}:pace", "hash", Politeness;
    /// Host → Crawl-delay from its robots.txt (ms), deleted with its robots.txt record.
    HostDelay, host_delay = "{name}:pace:delay", "hash", Politeness;
    /// Host → adaptive back-off delay (ms) after 429, Retry-After or a high share of 5xx; forgotten after 10 × `adaptive_backoff_max_delay` without news of the host.
    Backoff, backoff = "{name}:pace:backoff", "hash", Politeness;
    /// Host → recent share of its responses that were 5xx or 429 (per mille, weighted 1/10 per response), driving adaptive back-off; dropped under 1 %, forgotten with the back-off.
    BackoffErrors, backoff_errors = "{name}:pace:errors", "hash", Politeness;
    /// Per-host hash → where the sweep that deletes its stale entries has got to (HSCAN cursor).
    Sweep, sweep = "{name}:pace:sweep", "hash", Politeness;
    /// Host → cached robots.txt record (JSON: status, body, fetch time), until it expires.
    Robots, robots = "{name}:robots", "hash", Politeness;
    /// Host → when its cached robots.txt record expires (ms); the sweep deletes the record then.
    RobotsExpiry, robots_expiry = "{name}:robots:expiry", "zset", Politeness;
    /// Host → until when (ms) one worker holds the right to fetch its robots.txt; swept once run out.
    RobotsLocks, robots_locks = "{name}:robots:locks", "zset", Politeness;
    /// Request fingerprints: a set (scrapy-redis compatible), or the `dupefilter` mode's structure.
    Dupefilter, dupefilter = "{name}:dupefilter", "set, hash or string", Dupefilter;
    /// The dupefilter's mode and what the mode counts (and, for bloom and expiring, its other keys).
    DupefilterMeta, dupefilter_meta = "{name}:dupefilter:meta", "hash", Dupefilter;
    /// Scraped items as JSON objects (RPUSH, as scrapy-redis's RedisPipeline).
    Items, items = "{name}:items", "list", Items;
    /// Scraped items with `[items] sink = "stream"`: one entry per item, its JSON in the field `item` (XADD, read with consumer groups).
    ItemStream, item_stream = "{name}:items:stream", "stream", Items;
    /// Exporter id → its lease, as JSON (`crawlworker export`): until when (ms) it counts as alive, renewed while it runs, or since when it was found gone (`lost`). A gone exporter's unacknowledged items are taken back: its list `<items>:exporting:<exporter id>` goes back to the head of the items list (list sink; see `Keys::exporting`), or its stream entries are claimed by another (`XAUTOCLAIM`).
    Exporters, exporters = "{name}:items:exporters", "hash", Items;
    /// Items the store refused (a constraint, a value that does not fit its column), or that fit no item type, as JSON: the whole item, the store's message, the table, when; `crawlworker export` never drops an item.
    ItemsDead, items_dead = "{name}:items:dead", "list", Dead;
    /// Counters with Scrapy's names.
    Stats, stats = "{name}:stats", "hash", Stats;
    /// Malformed entries set aside, as JSON: key, entry, reason, time.
    Dead, dead = "{name}:dead", "list", Dead;
    /// Requests that failed for good (retries used up, refused, or a status no rule handles, such as 404), as JSON: URL, reason, kind, status, time, rule, request. `crawlworker failed` lists them.
    Failed, failed = "{name}:failed", "list", Dead;
    /// Worker id → heartbeat JSON (host, pid, started, pages); a worker gone for an hour is forgotten.
    Workers, workers = "{name}:workers", "hash", Workers;
    /// Spider handing work to this one (`to_spider`, directly or through others) → its key names and when its workers or `push-urls` last said so (JSON); `--until-drained` waits for them, and a relation not renewed for an hour is forgotten.
    Upstreams, upstreams = "{name}:upstreams", "hash", Workers;
    /// Announces new work to every idle worker (start entries pushed, retries requeued); a commit's new requests are leased to the workers waiting for them, each handed its leases on `{name}:wake:<worker id>` (a message `handed:` then length-prefixed parts: the queue key, then each lease's id, JSON, wait and interval). A worker joining the crew with less than it asked for publishes `crew:<out>:<crew>:<queue key>` here: a worker holding over twice the new fair share hands back what it cannot start.
    Wake, wake = "{name}:wake", "pub/sub channel", Channel;
}

impl Keys {
    /// The channel that wakes one worker for work a commit queued (see
    /// [`KeyKind::Waiting`]).
    pub fn worker_wake(&self, worker: &str) -> String {
        format!("{}:{worker}", self.wake)
    }
}

impl Keys {
    /// The list of items exporter `exporter` has taken from the items list
    /// and not yet acknowledged (`crawlworker export`, list sink): beside
    /// the items list, so in its hash slot.
    pub fn exporting(&self, exporter: &str) -> String {
        format!("{}:exporting:{exporter}", self.items)
    }

    /// The files an exporter has acknowledged the items of and not yet
    /// given their final name (`jsonl:`/`csv:` sinks): path → exporter.
    pub fn export_renames(&self) -> String {
        format!("{}:exporting:~renames", self.items)
    }
}

impl Keys {
    /// The list of requests this shard's commits hand to shard `to` (see
    /// [`KeyKind::Inbox`]), in this shard's slot.
    pub fn outbox(&self, to: usize) -> String {
        format!("{}:outbox:{to}", self.requests)
    }

    /// The lock of the mover moving [`Keys::outbox`]`(to)`: its token,
    /// until a deadline.
    pub fn outbox_lock(&self, to: usize) -> String {
        format!("{}:outbox:{to}:lock", self.requests)
    }

    /// In a sharded spider, the list of tasks this shard's commits hand
    /// to spider `spider` (`to_spider`), in this shard's slot, for a mover
    /// to deliver to that spider's start key (see `docs/scaling.md`,
    /// "Hand-offs to another spider").
    pub fn handoff_outbox(&self, spider: &str) -> String {
        format!("{}:handoff:{spider}", self.requests)
    }

    /// The lock of the mover moving [`Keys::handoff_outbox`]`(spider)`.
    pub fn handoff_outbox_lock(&self, spider: &str) -> String {
        format!("{}:handoff:{spider}:lock", self.requests)
    }
}

impl Keys {
    /// The keys of spider `name`: `templates` where the spider renames a
    /// kind, `start` for its start key if it names one, else the defaults.
    pub fn resolve(
        name: &str,
        mode: KeyMode,
        tag: Option<&str>,
        templates: &[(KeyKind, String)],
        start: Option<&str>,
    ) -> Keys {
        let tagged = Keys::tagged_name(name, mode, tag);
        Keys::build(|kind| {
            if let (KeyKind::Start, Some(start)) = (kind, start) {
                return start.to_string();
            }
            let template = templates
                .iter()
                .find(|(k, _)| *k == kind)
                .map_or(kind.template(), |(_, t)| t.as_str());
            template.replace("{name}", &tagged)
        })
    }

    /// The name keys are built from: the spider's, with the hash tag in
    /// cluster mode (`{bbs}`, or `{bbs}bbs-detail` with the tag `bbs`).
    pub fn tagged_name(name: &str, mode: KeyMode, tag: Option<&str>) -> String {
        match (mode, tag) {
            (KeyMode::Plain, _) => name.to_string(),
            (KeyMode::Cluster, Some(tag)) if tag != name => format!("{{{tag}}}{name}"),
            (KeyMode::Cluster, _) => format!("{{{name}}}"),
        }
    }

    /// Every key (channels excluded) with its kind.
    pub fn all(&self) -> impl Iterator<Item = (KeyKind, &str)> + '_ {
        KeyKind::ALL
            .iter()
            .filter(|k| k.group() != KeyGroup::Channel)
            .map(move |&k| (k, self.get(k)))
    }

    /// The keys in `groups`, each once.
    pub fn in_groups(&self, groups: &[KeyGroup]) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for (kind, key) in self.all() {
            if groups.contains(&kind.group()) && !out.contains(&key) {
                out.push(key);
            }
        }
        out
    }
}

/// The README's table of keys (kept in sync by a test).
pub fn markdown_table() -> String {
    let mut out = String::from("| key | kind in `[keys]` | type | holds |\n|---|---|---|---|\n");
    for kind in KeyKind::ALL {
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {} |\n",
            kind.template().replace("{name}", "<name>"),
            kind.name(),
            kind.redis_type(),
            kind.doc()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_scrapy_redis_names_and_cluster_mode_tags_them() {
        let plain = Keys::resolve("bbs", KeyMode::Plain, None, &[], None);
        assert_eq!(plain.requests, "bbs:requests");
        assert_eq!(plain.dupefilter, "bbs:dupefilter");
        assert_eq!(plain.start_urls, "bbs:start_urls");
        let cluster = Keys::resolve(
            "bbs",
            KeyMode::Cluster,
            None,
            &[(KeyKind::Items, "{name}:scraped".into())],
            Some("{bbs}:tasks"),
        );
        assert_eq!(cluster.items, "{bbs}:scraped");
        assert_eq!(cluster.stats, "{bbs}:stats");
        assert_eq!(cluster.start_urls, "{bbs}:tasks");
        let shared = Keys::resolve("bbs-detail", KeyMode::Cluster, Some("bbs"), &[], None);
        assert_eq!(shared.requests, "{bbs}bbs-detail:requests");
        let own = Keys::resolve("bbs", KeyMode::Cluster, Some("bbs"), &[], None);
        assert_eq!(own.requests, "{bbs}:requests");
    }

    #[test]
    fn every_kind_has_a_distinct_default_and_a_name_it_parses_back_from() {
        let keys = Keys::resolve("x", KeyMode::Plain, None, &[], None);
        let mut seen = std::collections::HashSet::new();
        for &kind in KeyKind::ALL {
            assert_eq!(KeyKind::parse(kind.name()), Some(kind));
            assert!(seen.insert(keys.get(kind).to_string()), "{kind:?}");
            assert!(!kind.doc().is_empty());
        }
    }
}
