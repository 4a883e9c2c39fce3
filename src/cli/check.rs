//! `crawlworker check`: loads each spider file as `run` would (without its
//! settings layers) and prints what it found: `ok` with the spider's shape,
//! its warnings, or every problem with file:line:column and a fix. Exits 2
//! when any file is broken.

use std::path::PathBuf;
use std::process::ExitCode;

use super::{output, spider_files};
use crate::frontier::shards::{shard_name, slot_of};
use crate::spider::Spider;
use crate::wording::plural;

pub(super) fn check(paths: &[PathBuf]) -> ExitCode {
    let files = spider_files(paths);
    if files.is_empty() {
        eprintln!(
            "crawlworker: no spider files (*.toml) in {}",
            paths
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        return ExitCode::from(2);
    }
    let mut bad = 0;
    for path in &files {
        match Spider::load(path) {
            Ok(s) => {
                for w in &s.warnings {
                    eprintln!("{w}");
                }
                let handed: Vec<String> = s
                    .handoffs
                    .iter()
                    .map(|h| format!(", hands links to `{}` ({})", h.spider, h.start_key))
                    .collect();
                let _ = output::line(format_args!(
                    "{}: ok (spider `{}`, {}, {}{}{}{})",
                    path.display(),
                    s.name,
                    plural(s.rules.len(), "rule", "rules"),
                    plural(s.items.len(), "item type", "item types"),
                    handed.concat(),
                    shard_slots(&s),
                    match s.warnings.len() {
                        0 => String::new(),
                        n => format!(", {}", plural(n, "warning", "warnings")),
                    }
                ));
            }
            Err(e) => {
                bad += 1;
                eprintln!("{e}");
            }
        }
    }
    if bad == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(2)
    }
}

/// A sharded spider's shards: the hash tag each one's keys carry on a
/// Redis Cluster and the slot it is in, so an operator can see (with
/// `CLUSTER SHARDS`) which master serves which shard. Nothing for a
/// spider of one shard.
fn shard_slots(spider: &Spider) -> String {
    let n = spider.shards.len();
    if n < 2 {
        return String::new();
    }
    let tags: Vec<String> = (0..n)
        .map(|shard| {
            let tag = shard_name(&spider.name, shard, n);
            format!("{{{tag}}} slot {}", slot_of(&tag))
        })
        .collect();
    format!(", {n} shards, on a Redis Cluster: {}", tags.join(", "))
}
