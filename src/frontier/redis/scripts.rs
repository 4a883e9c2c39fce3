//! The frontier's Lua scripts: each is `scripts/<name>.lua`, after what
//! every script shares: the `STAT` table of stat names (generated from
//! [`crate::stats`]), the constants generated from Rust (the politeness
//! rule's, the queue's), the dupefilter's
//! modes (`scripts/dupefilter.lua`) and the helpers by concern
//! (`scripts/lib/*.lua`: basics, key proofs, the stats tally, per-host
//! numbers, politeness, the queue, item sinks, leasing, the per-call
//! reset). Its own preamble names its keys (`K.requests`), and the names of
//! its arguments and records (`A.worker`, `PAGE.lease_next`) are resolved to
//! positions when the scripts are built (see [`super::protocol`]).
//!
//! They run as Redis Functions where the server has them (Redis 7.0 and
//! later): one library holds the helpers once and every script as a
//! function (`FCALL`), so a call runs only its script, not the hundred
//! helper definitions before it as `EVALSHA` does (measured: about a
//! tenth of what Redis spends on a commit of a few pages; see
//! BENCHMARKS.md). The library's name carries a hash of its text, so
//! workers of different versions each load and call their own. A server
//! without Functions (before 7.0, or with `FUNCTION`/`FCALL` renamed or
//! denied) gets the same scripts with `EVALSHA` instead, from the first
//! refusal on.

use std::marker::PhantomData;
use std::sync::{LazyLock, OnceLock};

use redis::{FromRedisValue, RedisError, RedisResult, Script, ToRedisArgs};
use sha1::{Digest, Sha1};

use super::link::Conn;
use super::protocol::ImportRetryArgs;
use super::protocol::{self, Layout, Wire};
use super::protocol::{
    AsideArgs, BloomGrowArgs, ClaimArgs, CommitArgs, DupeArgs, DupeBulkArgs, FlushArgs,
    HandoffDeliverArgs, ImportArgs, ImportStageArgs, LeaseArgs, LinksAheadArgs, NoArgs,
    OutboxDeliverArgs, OutboxTakeArgs, OutboxTrimArgs, PaceArgs, PushArgs, QuotaGiveArgs,
    QuotaTakeArgs, RecordShardsArgs, ReleaseArgs, RenewArgs, RequeueArgs, RobotsLockArgs, SeedArgs,
    SessionLockArgs, SessionStaleArgs, SessionStoreArgs, StatusArgs, SweepArgs, UpstreamShardArgs,
};
use super::protocol::{ExportAckArgs, ExportBeatArgs, ExportReclaimArgs, ExportTakeArgs};
use crate::frontier::{ItemSink, Keys};

/// Declares the scripts once: each is `scripts/<name>.lua`, with the
/// struct of its head arguments; this makes [`Scripts`], its one value
/// [`SCRIPTS`] and [`BODIES`].
macro_rules! scripts {
    ($($name:ident: $args:ty),+ $(,)?) => {
        /// Every script, with the struct of its head arguments.
        pub(super) struct Scripts {
            $(pub $name: FrontierScript<$args>,)+
        }

        /// Every script's own text (without the helpers), by name.
        const BODIES: &[(&str, &str)] = &[
            $((stringify!($name), include_str!(concat!("scripts/", stringify!($name), ".lua"))),)+
        ];

        pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
            $($name: script(stringify!($name)),)+
        });
    };
}

scripts! {
    lease: LeaseArgs,
    commit: CommitArgs,
    links_ahead: LinksAheadArgs,
    claim_start: ClaimArgs,
    renew: RenewArgs,
    release: ReleaseArgs,
    status: StatusArgs,
    push_start: PushArgs,
    requeue_failed: RequeueArgs,
    pace: PaceArgs,
    robots_lock: RobotsLockArgs,
    flush: FlushArgs,
    leases: NoArgs,
    dupe_bulk: DupeBulkArgs,
    dupe_prepare: DupeArgs,
    dupe_info: DupeArgs,
    bloom_grow: BloomGrowArgs,
    seed: SeedArgs,
    sweep: SweepArgs,
    set_aside: AsideArgs,
    import_stage: ImportStageArgs,
    import_queue: ImportArgs,
    import_retry: ImportRetryArgs,
    session_lock: SessionLockArgs,
    session_store: SessionStoreArgs,
    session_stale: SessionStaleArgs,
    outbox_push: NoArgs,
    outbox_take: OutboxTakeArgs,
    outbox_deliver: OutboxDeliverArgs,
    handoff_deliver: HandoffDeliverArgs,
    upstream_shard: UpstreamShardArgs,
    outbox_trim: OutboxTrimArgs,
    record_shards: RecordShardsArgs,
    quota_give: QuotaGiveArgs,
    quota_take: QuotaTakeArgs,
    export_take: ExportTakeArgs,
    export_ack: ExportAckArgs,
    export_reclaim: ExportReclaimArgs,
    export_beat: ExportBeatArgs,
}

/// The helpers every script has, in the order they build on each other:
/// the dupefilter's modes, then the helpers by concern (`scripts/lib/`).
const HELPERS: &[(&str, &str)] = &[
    ("dupefilter.lua", include_str!("scripts/dupefilter.lua")),
    ("lib/basics.lua", include_str!("scripts/lib/basics.lua")),
    ("lib/proofs.lua", include_str!("scripts/lib/proofs.lua")),
    ("lib/tally.lua", include_str!("scripts/lib/tally.lua")),
    ("lib/hosts.lua", include_str!("scripts/lib/hosts.lua")),
    (
        "lib/politeness.lua",
        include_str!("scripts/lib/politeness.lua"),
    ),
    ("lib/queue.lua", include_str!("scripts/lib/queue.lua")),
    ("lib/outbox.lua", include_str!("scripts/lib/outbox.lua")),
    ("lib/sinks.lua", include_str!("scripts/lib/sinks.lua")),
    ("lib/leasing.lua", include_str!("scripts/lib/leasing.lua")),
    (
        "lib/upstreams.lua",
        include_str!("scripts/lib/upstreams.lua"),
    ),
    ("lib/call.lua", include_str!("scripts/lib/call.lua")),
];

/// The globals the scripts read, as locals of the library (see
/// [`globals_block`]). Only names every Redis with Functions has: a
/// function's first call reads them all, and reading a global Redis does
/// not define is an error there.
const GLOBALS: &[&str] = &[
    "redis", "tonumber", "tostring", "ipairs", "pairs", "next", "error", "type", "unpack",
    "string", "math", "table", "cjson",
];

/// The scripts read Lua's and Redis's globals (`redis.call`, `tonumber`,
/// `string.sub`, …) through locals of these names. A Redis Function runs
/// with an empty globals table whose metatable reaches the real ones, so a
/// global read misses there first; a local is an upvalue read (measured:
/// 3 % of Redis's instructions on a crawl's commits). The library's own
/// code, run when it is loaded, may read only the loading API
/// (`redis.register_function`: any other global is an error then), so the
/// locals start empty and `bind_globals` fills them on a function's first
/// call (from `begin_call`, lib/call.lua).
fn globals_block() -> String {
    let names = GLOBALS.join(", ");
    format!(
        "local function runtime_globals()\n  return {names}\nend\n\
         local {names}\n\
         local function bind_globals()\n  if tonumber == nil then\n    {names} = runtime_globals()\n  end\nend\n"
    )
}

/// The constants generated from Rust (the politeness rule's, the queue's),
/// then the helpers; for the Functions library, after the globals' locals
/// (a script sent with `EVALSHA` reads the globals themselves: it has no
/// room for them, as Lua allows a chunk 200 locals).
fn shared(globals: bool) -> String {
    let mut out = if globals {
        globals_block()
    } else {
        String::new()
    };
    out.push_str(&crate::frontier::politeness::lua_constants());
    out.push_str(&crate::frontier::fairness::lua_constants());
    out.push_str(&crate::frontier::parking::lua_constants());
    out.push_str(&super::handed::lua_constants());
    out.push_str(&format!(
        "local MAX_PRIORITY = {}\n",
        crate::frontier::MAX_PRIORITY
    ));
    for (_, text) in HELPERS {
        out.push_str(text);
        out.push('\n');
    }
    out
}

/// One script: its layout, its function in the library, and its own text
/// for `EVALSHA`. `A` is the struct of its head arguments.
pub(super) struct FrontierScript<A> {
    layout: &'static Layout,
    /// The function's name in [`LIBRARY`].
    function: String,
    /// For `EVALSHA`, made (and hashed) only on a server without Functions.
    eval: OnceLock<Script>,
    args: PhantomData<fn(A)>,
}

impl<A: Wire> FrontierScript<A> {
    /// A call for the spider whose keys are `keys` (items going to
    /// `sink`), with its head arguments.
    pub fn call<'a>(&'a self, keys: &Keys, sink: ItemSink, args: A) -> Call<'a> {
        self.call_choosing(keys, sink, &[], args)
    }

    /// The same, with keys the layout leaves to the caller, by name.
    pub fn call_choosing<'a>(
        &'a self,
        keys: &Keys,
        sink: ItemSink,
        chosen: &[(&'static str, &str)],
        args: A,
    ) -> Call<'a> {
        let mut head = Vec::with_capacity(self.layout.args.len());
        args.write_to(&mut head);
        let (keys, error) = match self.layout.call_keys(keys, sink, chosen) {
            Ok(keys) => (
                keys.into_iter().map(|k| k.as_bytes().to_vec()).collect(),
                None,
            ),
            Err(e) => (Vec::new(), Some(e)),
        };
        Call {
            function: &self.function,
            eval: &self.eval,
            layout: self.layout,
            keys,
            args: head,
            error,
        }
    }
}

/// A call of a script being put together: its keys, its head arguments,
/// then what follows them.
pub(super) struct Call<'a> {
    function: &'a str,
    eval: &'a OnceLock<Script>,
    layout: &'static Layout,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
    /// A key the layout asks for and the caller did not give.
    error: Option<String>,
}

impl Call<'_> {
    /// A key after the declared ones (the layout's `more_keys`).
    pub fn more_key(&mut self, key: &str) -> &mut Self {
        self.keys.push(key.as_bytes().to_vec());
        self
    }

    /// A record after the head arguments.
    pub fn record(&mut self, record: impl Wire) -> &mut Self {
        record.write_to(&mut self.args);
        self
    }

    /// Plain values after the head arguments (ids, entries, …), or a
    /// record already written out.
    pub fn values<T: ToRedisArgs>(&mut self, values: T) -> &mut Self {
        self.args.extend(values.to_redis_args());
        self
    }

    /// Runs the script: `FCALL` (loading the library if the server does
    /// not have it yet), or `EVALSHA` on a server without Functions.
    pub async fn invoke_async<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        if let Some(e) = &self.error {
            return Err(RedisError::from((
                redis::ErrorKind::ClientError,
                "script call incomplete",
                e.clone(),
            )));
        }
        if conn.functions() {
            let mut fcall = redis::cmd("FCALL");
            fcall
                .arg(self.function)
                .arg(self.keys.len())
                .arg(&self.keys)
                .arg(&self.args);
            match fcall.query_async(conn).await {
                Err(e) if no_such_function(&e) => match load_library(conn).await {
                    Ok(()) => return fcall.query_async(conn).await,
                    Err(e) if no_functions(&e) => conn.without_functions(),
                    Err(e) => return Err(e),
                },
                Err(e) if no_functions(&e) => conn.without_functions(),
                done => return done,
            }
        }
        let layout = self.layout;
        let mut eval = self
            .eval
            .get_or_init(|| eval_script(layout))
            .prepare_invoke();
        for key in &self.keys {
            eval.key(key.as_slice());
        }
        for arg in &self.args {
            eval.arg(arg.as_slice());
        }
        eval.invoke_async(conn).await
    }
}

/// `FCALL` of a function the server has not loaded (a new server, a
/// `FUNCTION FLUSH`, a failover to a node that never had it).
fn no_such_function(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::ResponseError && e.to_string().contains("Function not found")
}

/// The server has no Functions for us: `FCALL` or `FUNCTION` is an
/// unknown command (before Redis 7.0, or renamed away) or one this
/// connection's user may not run. (A command refused inside a script is
/// the script's error, not this.)
fn no_functions(e: &RedisError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    (text.contains("unknown command") || text.contains("noperm"))
        && (text.contains("'fcall'") || text.contains("'function"))
}

/// Loads [`LIBRARY`] unless the server has it. Its name is a hash of its
/// text, so a library of that name is this one: loaded already (by
/// another worker starting at the same moment) is as good as loaded now.
/// Not `REPLACE`: Redis compiles a library before it replaces one, some
/// milliseconds of its CPU each time, and every worker of a crawl
/// starting together would pay them.
async fn load_library(conn: &mut Conn) -> RedisResult<()> {
    match redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg(&LIBRARY.text)
        .query_async::<redis::Value>(conn)
        .await
    {
        Err(e) if library_exists(&e) => Ok(()),
        done => done.map(drop),
    }
}

/// `FUNCTION LOAD` of a library the server has already.
fn library_exists(e: &RedisError) -> bool {
    e.kind() == redis::ErrorKind::ResponseError && e.to_string().contains("already exists")
}

/// The Functions library: every script registered as a function, after
/// the `STAT` table, the generated constants and the helpers, which are
/// made once when it is loaded. `KEYS` and `ARGV` are the call's, and
/// `begin_call` (lib/call.lua) resets what the helpers keep during one
/// call.
struct Library {
    text: String,
    /// Function names start with this (the library's name).
    prefix: String,
}

/// Scripts that only read: as functions they are flagged `no-writes`, so
/// they still answer (`crawlworker status`) when Redis is out of memory.
const READ_ONLY: &[&str] = &["status", "leases", "dupe_info", "upstream_shard"];

/// Every script's layout, declared in [`protocol`].
static LAYOUTS: LazyLock<Vec<Layout>> = LazyLock::new(protocol::layouts);

/// A script's body after its preamble of keys, its argument names
/// resolved (see [`protocol`]). A script that reads a name its layout does
/// not declare cannot run: the first use of the scripts panics, and a test
/// makes that use.
fn with_preamble(layout: &Layout) -> String {
    let body = protocol::resolve_names(layout, body(layout.name)).unwrap_or_else(|e| panic!("{e}"));
    format!("{}{body}", protocol::lua_preamble(layout))
}

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let shared = shared(true);
    let mut functions = String::new();
    for layout in LAYOUTS.iter() {
        let name = layout.name;
        let flags = if READ_ONLY.contains(&name) {
            ", flags = {'no-writes'}"
        } else {
            ""
        };
        functions.push_str(&format!(
            "REGISTER_FUNCTION{{function_name = FUNCTION_PREFIX .. '{name}', callback = function(keys, args)\n\
             KEYS, ARGV = keys, args\nbegin_call()\n{}\nend{flags}}}\n",
            with_preamble(layout)
        ));
    }
    let stats = crate::stats::lua_table(&format!("{shared}{functions}"));
    // Taken before the helpers make `redis` a local (see globals_block).
    let code = format!(
        "local REGISTER_FUNCTION = redis.register_function\nlocal KEYS, ARGV\n{stats}\n{shared}{functions}"
    );
    let hash = Sha1::digest(code.as_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    let prefix = format!("crawlworker_{hex}");
    Library {
        text: format!("#!lua name={prefix}\nlocal FUNCTION_PREFIX = '{prefix}_'\n{code}"),
        prefix,
    }
});

/// A script for `EVALSHA`: its body after the `STAT` table of the stats it
/// (or the helpers) names, the generated constants and the helpers.
fn eval_script(layout: &Layout) -> Script {
    Script::new(&eval_text(layout))
}

fn eval_text(layout: &Layout) -> String {
    let shared = shared(false);
    let text = with_preamble(layout);
    let stats = crate::stats::lua_table(&format!("{shared}{text}"));
    format!("{stats}\n{shared}{text}")
}

pub(super) fn body(name: &str) -> &'static str {
    BODIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, body)| *body)
        .unwrap_or_else(|| panic!("no script {name}"))
}

/// The script `name`: a function of [`LIBRARY`], and for `EVALSHA` the
/// same script on its own (see [`eval_script`]).
fn script<A>(name: &str) -> FrontierScript<A> {
    let layout = LAYOUTS
        .iter()
        .find(|l| l.name == name)
        .unwrap_or_else(|| panic!("no layout for script {name}"));
    FrontierScript {
        layout,
        function: format!("{}_{name}", LIBRARY.prefix),
        eval: OnceLock::new(),
        args: PhantomData,
    }
}

#[cfg(test)]
mod tests {
    use super::{BODIES, HELPERS, LAYOUTS};
    use crate::stats;

    /// Every script's text: the helpers, then each script's own.
    fn sources() -> Vec<(String, &'static str)> {
        HELPERS
            .iter()
            .map(|(file, text)| (file.to_string(), *text))
            .chain(
                BODIES
                    .iter()
                    .map(|(name, text)| (format!("{name}.lua"), *text)),
            )
            .collect()
    }

    /// A Redis without Functions gets each script on its own, helpers and
    /// all, as one chunk, which Lua allows 200 locals: every script must
    /// compile so (a crawl reaches only some of them).
    #[test]
    fn every_script_compiles_for_evalsha() {
        let redis = crawlworker_testkit::RedisServer::start();
        let mut conn = redis.conn();
        for layout in LAYOUTS.iter() {
            let loaded: redis::RedisResult<String> = redis::cmd("SCRIPT")
                .arg("LOAD")
                .arg(super::eval_text(layout))
                .query(&mut conn);
            if let Err(e) = loaded {
                panic!("script {} does not compile for EVALSHA: {e}", layout.name);
            }
        }
    }

    /// A Redis Function shares the helpers' locals between calls: every
    /// lower-case one outside a function (what a call keeps while it runs)
    /// must be made new by `begin_call`, or one call would see another's.
    /// Constants are upper-case.
    #[test]
    fn begin_call_resets_every_local_the_helpers_keep_during_a_call() {
        let call = include_str!("scripts/lib/call.lua");
        let start = call
            .find("local function begin_call()")
            .expect("lib/call.lua defines begin_call");
        let reset = &call[start..start + call[start..].find("\nend").unwrap_or(0)];
        for (_, text) in HELPERS {
            for line in text.lines() {
                let Some(decl) = line.strip_prefix("local ") else {
                    continue;
                };
                if decl.starts_with("function ") {
                    continue;
                }
                let names = decl.split('=').next().unwrap_or("");
                for name in names.split(',').map(str::trim) {
                    if name.chars().any(|c| c.is_ascii_lowercase()) {
                        assert!(
                            reset.contains(&format!("{name},"))
                                || reset.contains(&format!("{name} =")),
                            "begin_call (lib/call.lua) does not reset `{name}`"
                        );
                    }
                }
            }
        }
    }

    /// The single-quoted string literals of a script, comments skipped.
    fn literals(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut open: Option<String> = None;
            let mut prev = ' ';
            for c in line.chars() {
                if let Some(literal) = open.as_mut() {
                    if c == '\'' {
                        out.push(std::mem::take(literal));
                        open = None;
                    } else {
                        literal.push(c);
                    }
                } else if c == '\'' {
                    open = Some(String::new());
                } else if c == '-' && prev == '-' {
                    break;
                }
                prev = c;
            }
        }
        out
    }

    /// `scheduler/enqueued/redis` and the like.
    fn looks_like_a_stat(s: &str) -> bool {
        s.contains('/')
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '/')
    }

    /// Stat names live in `crate::stats`: a script that spells one (or
    /// names a `STAT.X` that does not exist) fails here, not in Redis.
    #[test]
    fn scripts_name_stats_only_through_the_generated_table() {
        let names: Vec<&str> = stats::ALL.iter().map(|s| s.name).collect();
        for (file, text) in sources() {
            for literal in literals(text) {
                let literal = literal.as_str();
                assert!(
                    !names.contains(&literal) && !looks_like_a_stat(literal),
                    "{file} spells the stat name '{literal}'; use STAT.<ID> (see src/stats.rs)"
                );
            }
            for (i, _) in text.match_indices("STAT.") {
                let id: String = text[i + 5..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                assert!(
                    stats::ALL.iter().any(|s| s.id == id),
                    "{file} uses STAT.{id}, which src/stats.rs does not define"
                );
            }
        }
    }

    /// Scripts read their keys and arguments by name (`K.requests`,
    /// `A.worker`, `ARGV[at + PAGE.lease_next]`), never by a position
    /// written by hand: the positions come from the layouts in
    /// `protocol.rs`.
    #[test]
    fn no_script_indexes_keys_or_argv_by_number() {
        for (file, text) in sources() {
            for (n, line) in text.lines().enumerate() {
                let code = line.split("--").next().unwrap_or("");
                let by_number = |what: &str| {
                    code.match_indices(what).any(|(i, _)| {
                        let inside = &code[i + what.len()..];
                        let inside = &inside[..inside.find(']').unwrap_or(inside.len())];
                        inside.trim().starts_with(|c: char| c.is_ascii_digit())
                            || inside
                                .split('+')
                                .skip(1)
                                .any(|t| t.trim().starts_with(|c: char| c.is_ascii_digit()))
                    })
                };
                assert!(
                    !code.contains("KEYS[") && !by_number("ARGV["),
                    "{file}:{}: `{}` indexes KEYS or ARGV by a number; name it in protocol.rs",
                    n + 1,
                    line.trim()
                );
            }
        }
    }

    /// Every script has a layout and every layout a script; Lua names in
    /// a layout are unique identifiers.
    #[test]
    fn every_script_has_one_layout_with_unique_names() {
        for (name, _) in BODIES {
            assert_eq!(
                LAYOUTS.iter().filter(|l| l.name == *name).count(),
                1,
                "{name}"
            );
        }
        assert_eq!(LAYOUTS.len(), BODIES.len());
        for layout in LAYOUTS.iter() {
            let mut names: Vec<String> =
                layout.keys.iter().map(|slot| format!("{slot:?}")).collect();
            names.sort();
            let before = names.len();
            names.dedup();
            assert_eq!(names.len(), before, "{}: a key twice", layout.name);
            for arg in layout.args {
                assert!(
                    arg.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                    "{}: `{arg}`",
                    layout.name
                );
            }
        }
    }

    /// A script reads the records its layout says follow its head
    /// arguments, and no other.
    #[test]
    fn scripts_read_the_records_their_layouts_declare() {
        let records = [
            "PAGE",
            "PAGE_RARE",
            "TASK",
            "LINK",
            "HANDOFF",
            "STAT_PAIR",
            "CLAIM",
            "REQUEUE",
            "SEED",
            "ASIDE",
        ];
        for layout in LAYOUTS.iter() {
            let body = super::body(layout.name);
            for record in records {
                let declared = layout.tail.iter().any(|r| r.lua == record);
                let read = body.contains(&format!("{record}."));
                assert_eq!(
                    declared, read,
                    "{}.lua: record {record} declared {declared}, read {read}",
                    layout.name
                );
            }
        }
    }
}
