//! The frontier's Lua scripts: each is `scripts/<name>.lua` after the
//! `STAT` table of stat names (generated from [`crate::stats`]),
//! `scripts/dupefilter.lua` (the dupefilter's modes) and
//! `scripts/prelude.lua`, the helpers they share.
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

use std::sync::LazyLock;

use redis::{FromRedisValue, RedisError, RedisResult, Script, ToRedisArgs};
use sha1::{Digest, Sha1};

use super::connection::Conn;

pub(super) struct Scripts {
    pub lease: FrontierScript,
    pub commit: FrontierScript,
    pub claim_start: FrontierScript,
    pub renew: FrontierScript,
    pub release: FrontierScript,
    pub status: FrontierScript,
    pub push_start: FrontierScript,
    pub requeue_failed: FrontierScript,
    pub pace: FrontierScript,
    pub robots_lock: FrontierScript,
    pub flush: FrontierScript,
    pub leases: FrontierScript,
    pub dupe_bulk: FrontierScript,
    pub dupe_prepare: FrontierScript,
    pub dupe_info: FrontierScript,
    pub seed: FrontierScript,
    pub sweep: FrontierScript,
    pub set_aside: FrontierScript,
}

/// The helpers every script starts with.
fn shared() -> String {
    format!(
        "{}\n{}\n",
        include_str!("scripts/dupefilter.lua"),
        include_str!("scripts/prelude.lua")
    )
}

/// One script: its function in the library, and its own text for `EVALSHA`.
pub(super) struct FrontierScript {
    /// The function's name in [`LIBRARY`].
    function: String,
    eval: Script,
}

impl FrontierScript {
    pub fn prepare_invoke(&self) -> Invocation<'_> {
        Invocation {
            script: self,
            keys: Vec::new(),
            args: Vec::new(),
        }
    }

    pub fn key<T: ToRedisArgs>(&self, key: T) -> Invocation<'_> {
        let mut invocation = self.prepare_invoke();
        invocation.key(key);
        invocation
    }
}

/// A call of a script being put together: its keys and arguments.
pub(super) struct Invocation<'a> {
    script: &'a FrontierScript,
    keys: Vec<Vec<u8>>,
    args: Vec<Vec<u8>>,
}

impl<'a> Invocation<'a> {
    pub fn key<T: ToRedisArgs>(&mut self, key: T) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    pub fn arg<T: ToRedisArgs>(&mut self, arg: T) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// Runs the script: `FCALL` (loading the library if the server does
    /// not have it yet), or `EVALSHA` on a server without Functions.
    pub async fn invoke_async<T: FromRedisValue>(&self, conn: &mut Conn) -> RedisResult<T> {
        if conn.functions() {
            let mut fcall = redis::cmd("FCALL");
            fcall
                .arg(&self.script.function)
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
        let mut eval = self.script.eval.prepare_invoke();
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

async fn load_library(conn: &mut Conn) -> RedisResult<()> {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(&LIBRARY.text)
        .query_async::<redis::Value>(conn)
        .await
        .map(drop)
}

/// The Functions library: every script registered as a function, after
/// the `STAT` table and the helpers, which are made once when it is
/// loaded. `KEYS` and `ARGV` are the call's, and `begin_call` (prelude.lua)
/// resets what the helpers keep during one call.
struct Library {
    text: String,
    /// Function names start with this (the library's name).
    prefix: String,
}

/// Scripts that only read: as functions they are flagged `no-writes`, so
/// they still answer (`crawlworker status`) when Redis is out of memory.
const READ_ONLY: &[&str] = &["status", "leases", "dupe_info"];

static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let shared = shared();
    let mut functions = String::new();
    for (name, body) in BODIES {
        let flags = if READ_ONLY.contains(name) {
            ", flags = {'no-writes'}"
        } else {
            ""
        };
        functions.push_str(&format!(
            "redis.register_function{{function_name = FUNCTION_PREFIX .. '{name}', callback = function(keys, args)\n\
             KEYS, ARGV = keys, args\nbegin_call()\n{body}\nend{flags}}}\n"
        ));
    }
    let stats = crate::stats::lua_table(&format!("{shared}{functions}"));
    let code = format!("local KEYS, ARGV\n{stats}\n{shared}{functions}");
    let hash = Sha1::digest(code.as_bytes());
    let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
    let prefix = format!("crawlworker_{hex}");
    Library {
        text: format!("#!lua name={prefix}\nlocal FUNCTION_PREFIX = '{prefix}_'\n{code}"),
        prefix,
    }
});

/// Every script's own text (without the helpers), by name.
const BODIES: &[(&str, &str)] = &[
    ("lease", include_str!("scripts/lease.lua")),
    ("commit", include_str!("scripts/commit.lua")),
    ("claim_start", include_str!("scripts/claim_start.lua")),
    ("renew", include_str!("scripts/renew.lua")),
    ("release", include_str!("scripts/release.lua")),
    ("status", include_str!("scripts/status.lua")),
    ("push_start", include_str!("scripts/push_start.lua")),
    ("requeue_failed", include_str!("scripts/requeue_failed.lua")),
    ("pace", include_str!("scripts/pace.lua")),
    ("robots_lock", include_str!("scripts/robots_lock.lua")),
    ("flush", include_str!("scripts/flush.lua")),
    ("leases", include_str!("scripts/leases.lua")),
    ("dupe_bulk", include_str!("scripts/dupe_bulk.lua")),
    ("dupe_prepare", include_str!("scripts/dupe_prepare.lua")),
    ("dupe_info", include_str!("scripts/dupe_info.lua")),
    ("seed", include_str!("scripts/seed.lua")),
    ("sweep", include_str!("scripts/sweep.lua")),
    ("set_aside", include_str!("scripts/set_aside.lua")),
];

/// The script `name`: a function of [`LIBRARY`], and for `EVALSHA` its
/// body after the `STAT` table of the stats it (or the helpers) names and
/// the helpers.
fn script(name: &str) -> FrontierScript {
    let body = BODIES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, body)| *body)
        .unwrap_or_else(|| panic!("no script {name}"));
    let shared = shared();
    let stats = crate::stats::lua_table(&format!("{shared}{body}"));
    FrontierScript {
        function: format!("{}_{name}", LIBRARY.prefix),
        eval: Script::new(&format!("{stats}\n{shared}{body}")),
    }
}

pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    lease: script("lease"),
    commit: script("commit"),
    claim_start: script("claim_start"),
    renew: script("renew"),
    release: script("release"),
    status: script("status"),
    push_start: script("push_start"),
    requeue_failed: script("requeue_failed"),
    pace: script("pace"),
    robots_lock: script("robots_lock"),
    flush: script("flush"),
    leases: script("leases"),
    dupe_bulk: script("dupe_bulk"),
    dupe_prepare: script("dupe_prepare"),
    dupe_info: script("dupe_info"),
    seed: script("seed"),
    sweep: script("sweep"),
    set_aside: script("set_aside"),
});

#[cfg(test)]
mod tests {
    use super::BODIES;
    use crate::stats;

    /// Every script's text: the helpers, then each script's own.
    fn sources() -> Vec<(String, &'static str)> {
        let helpers = [
            ("prelude.lua", include_str!("scripts/prelude.lua")),
            ("dupefilter.lua", include_str!("scripts/dupefilter.lua")),
        ];
        helpers
            .iter()
            .map(|(file, text)| (file.to_string(), *text))
            .chain(
                BODIES
                    .iter()
                    .map(|(name, text)| (format!("{name}.lua"), *text)),
            )
            .collect()
    }

    /// A Redis Function shares the helpers' locals between calls: every
    /// lower-case one outside a function (what a call keeps while it runs)
    /// must be made new by `begin_call`, or one call would see another's.
    /// Constants are upper-case.
    #[test]
    fn begin_call_resets_every_local_the_helpers_keep_during_a_call() {
        let prelude = include_str!("scripts/prelude.lua");
        let start = prelude
            .find("local function begin_call()")
            .expect("prelude.lua defines begin_call");
        let reset = &prelude[start..start + prelude[start..].find("\nend").unwrap_or(0)];
        for text in [prelude, include_str!("scripts/dupefilter.lua")] {
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
                            "begin_call (prelude.lua) does not reset `{name}`"
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
}
