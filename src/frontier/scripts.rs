//! The frontier's Lua scripts, loaded once: each is `scripts/<name>.lua`
//! prefixed with the `STAT` table of stat names (generated from
//! [`crate::stats`]), `scripts/dupefilter.lua` (the dupefilter's modes) and
//! `scripts/prelude.lua`, the helpers they share.

use std::sync::LazyLock;

use redis::Script;

pub(super) struct Scripts {
    pub lease: Script,
    pub commit: Script,
    pub claim_start: Script,
    pub renew: Script,
    pub release: Script,
    pub status: Script,
    pub push_start: Script,
    pub requeue_failed: Script,
    pub pace: Script,
    pub robots_lock: Script,
    pub flush: Script,
    pub leases: Script,
    pub dupe_bulk: Script,
    pub dupe_prepare: Script,
    pub dupe_info: Script,
    pub seed: Script,
    pub sweep: Script,
    pub set_aside: Script,
}

/// A script: `body` after the `STAT` table of the stats it (or the shared
/// helpers) names, the dupefilter's modes and the shared helpers.
fn script(body: &str) -> Script {
    let shared = format!(
        "{}\n{}\n",
        include_str!("scripts/dupefilter.lua"),
        include_str!("scripts/prelude.lua")
    );
    let stats = crate::stats::lua_table(&format!("{shared}{body}"));
    Script::new(&format!("{stats}\n{shared}{body}"))
}

pub(super) static SCRIPTS: LazyLock<Scripts> = LazyLock::new(|| Scripts {
    lease: script(include_str!("scripts/lease.lua")),
    commit: script(include_str!("scripts/commit.lua")),
    claim_start: script(include_str!("scripts/claim_start.lua")),
    renew: script(include_str!("scripts/renew.lua")),
    release: script(include_str!("scripts/release.lua")),
    status: script(include_str!("scripts/status.lua")),
    push_start: script(include_str!("scripts/push_start.lua")),
    requeue_failed: script(include_str!("scripts/requeue_failed.lua")),
    pace: script(include_str!("scripts/pace.lua")),
    robots_lock: script(include_str!("scripts/robots_lock.lua")),
    flush: script(include_str!("scripts/flush.lua")),
    leases: script(include_str!("scripts/leases.lua")),
    dupe_bulk: script(include_str!("scripts/dupe_bulk.lua")),
    dupe_prepare: script(include_str!("scripts/dupe_prepare.lua")),
    dupe_info: script(include_str!("scripts/dupe_info.lua")),
    seed: script(include_str!("scripts/seed.lua")),
    sweep: script(include_str!("scripts/sweep.lua")),
    set_aside: script(include_str!("scripts/set_aside.lua")),
});

/// Every script's own text (without the preamble), by file name.
#[cfg(test)]
pub(super) const SOURCES: &[(&str, &str)] = &[
    ("prelude.lua", include_str!("scripts/prelude.lua")),
    ("dupefilter.lua", include_str!("scripts/dupefilter.lua")),
    ("dupe_bulk.lua", include_str!("scripts/dupe_bulk.lua")),
    ("dupe_prepare.lua", include_str!("scripts/dupe_prepare.lua")),
    ("dupe_info.lua", include_str!("scripts/dupe_info.lua")),
    ("lease.lua", include_str!("scripts/lease.lua")),
    ("commit.lua", include_str!("scripts/commit.lua")),
    ("claim_start.lua", include_str!("scripts/claim_start.lua")),
    ("renew.lua", include_str!("scripts/renew.lua")),
    ("release.lua", include_str!("scripts/release.lua")),
    ("status.lua", include_str!("scripts/status.lua")),
    ("push_start.lua", include_str!("scripts/push_start.lua")),
    (
        "requeue_failed.lua",
        include_str!("scripts/requeue_failed.lua"),
    ),
    ("pace.lua", include_str!("scripts/pace.lua")),
    ("robots_lock.lua", include_str!("scripts/robots_lock.lua")),
    ("seed.lua", include_str!("scripts/seed.lua")),
    ("flush.lua", include_str!("scripts/flush.lua")),
    ("leases.lua", include_str!("scripts/leases.lua")),
    ("sweep.lua", include_str!("scripts/sweep.lua")),
    ("set_aside.lua", include_str!("scripts/set_aside.lua")),
];

#[cfg(test)]
mod tests {
    use super::SOURCES;
    use crate::stats;

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
        for (file, text) in SOURCES {
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
