//! `to_spider`: the spiders a follow entry hands its links to. Each is
//! read once from `<name>.toml` beside this spider's file, for its start
//! key, the key's type, its wake channel, its `upstreams` hash and the
//! task fields it requires; in cluster mode its start key must share this
//! spider's slot. From them, the relations of the spider's whole pipeline
//! ([`pipeline`]), which its side records in Redis. Writing the tasks and
//! the relations is the frontier's.

use std::collections::VecDeque;
use std::path::PathBuf;

use super::{compile_with, Compiler};
use crate::frontier::connection::hash_tag;
use crate::frontier::keys::Keys;
use crate::frontier::pipeline::{Relation, UpstreamKeys};
use crate::reader::{At, Loc};
use crate::spider::{Handoff, Spider, StartKind};

impl Compiler<'_> {
    /// The index of the spider a `to_spider` entry hands its links to, read
    /// from `<name>.toml` beside this file: its start key, the key's type,
    /// its wake channel, and the task fields it requires (which `meta` must
    /// carry, or it would refuse every task).
    pub(super) fn handoff(&self, to: &At<String>, meta: &[At<String>]) -> Option<usize> {
        if !self.name(to, "spider") {
            return None;
        }
        if let Some(i) = self
            .handoffs
            .borrow()
            .iter()
            .position(|(h, _)| h.spider == to.value)
        {
            return Some(i);
        }
        let target = if self.resolve_handoffs {
            self.target_spider(to)?
        } else {
            // Only this spider's keys are wanted; its targets are not read.
            Handoff {
                spider: to.value.clone(),
                start_key: String::new(),
                kind: StartKind::List,
                wake: String::new(),
                waiting: String::new(),
                task_fields: Vec::new(),
                upstreams: String::new(),
                inbox: String::new(),
                control: String::new(),
                dead: String::new(),
                stats: String::new(),
            }
        };
        let carried = |f: &String| meta.iter().any(|m| m.value == *f || m.value == "*");
        let missing: Vec<&String> = target.task_fields.iter().filter(|f| !carried(f)).collect();
        if !missing.is_empty() {
            let names: Vec<String> = missing.iter().map(|f| format!("\"{f}\"")).collect();
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` requires the task fields {} (its `task_fields`), which this entry does not pass",
                    to.value,
                    names.join(", ")
                ),
                format!("carry them: meta = [{}]", names.join(", ")),
            );
            return None;
        }
        let mut handoffs = self.handoffs.borrow_mut();
        handoffs.push((target, to.loc.clone()));
        Some(handoffs.len() - 1)
    }

    /// Reads the spider `to` names from beside this file.
    fn target_spider(&self, to: &At<String>) -> Option<Handoff> {
        let path = self.path.with_file_name(format!("{}.toml", to.value));
        let fail = |why: String| {
            self.problem(
                &to.loc,
                format!(
                    "spider `{}` is read from {} for its start key, but {why}",
                    to.value,
                    path.display()
                ),
                format!(
                    "put the `{}` spider file beside this one (and run `crawlworker check` on it)",
                    to.value
                ),
            );
            None
        };
        if path == self.path {
            return fail("that is this spider: follow within it with `rule`".into());
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) => return fail(format!("it cannot be read ({e})")),
        };
        let spider = match compile_with(&path, &text, false) {
            Ok(spider) => spider,
            Err(e) => {
                let first = e
                    .diagnostics()
                    .iter()
                    .find(|d| !d.warning)
                    .map(|d| d.to_string());
                return fail(format!(
                    "it has problems: {}",
                    first.unwrap_or_else(|| e.to_string())
                ));
            }
        };
        if spider.name != to.value {
            return fail(format!("the spider there is named `{}`", spider.name));
        }
        Some(Handoff {
            spider: spider.name,
            start_key: spider.keys.start_urls,
            kind: spider.start.kind,
            wake: spider.keys.wake,
            waiting: spider.keys.waiting,
            task_fields: spider.start.task_fields.unwrap_or_default(),
            upstreams: spider.keys.upstreams,
            inbox: spider.keys.inbox,
            control: spider.keys.control,
            dead: spider.keys.dead,
            stats: spider.keys.stats,
        })
    }

    /// In cluster mode a page's commit writes the other spider's start key
    /// and waiting workers' hash too, and the heartbeat its `upstreams`
    /// hash, so all must be in this spider's slot. A sharded spider hands
    /// its tasks through outboxes (see `docs/scaling.md`), so the other
    /// spider's keys need only share one slot among themselves.
    pub(super) fn check_handoff_slots(
        &self,
        keys: &Keys,
        shards: usize,
        handoffs: &[(Handoff, Loc)],
    ) {
        let tag = hash_tag(&keys.requests);
        if tag == keys.requests {
            return; // plain keys: a single Redis, any key goes
        }
        for (h, loc) in handoffs {
            // Its `upstreams` hash is written beside its own keys (see
            // frontier::pipeline).
            let keys = [
                ("start key", &h.start_key),
                ("waiting workers' key", &h.waiting),
                ("upstreams key", &h.upstreams),
                ("inbox key", &h.inbox),
                ("control key", &h.control),
                ("dead letters key", &h.dead),
                ("stats key", &h.stats),
            ];
            if shards > 1 {
                let own = hash_tag(&h.start_key);
                if let Some((what, key)) = keys.into_iter().find(|(_, k)| hash_tag(k) != own) {
                    self.problem(
                        loc,
                        format!(
                            "on a Redis Cluster `{}`'s keys must share one slot, for this spider's movers to hand it tasks in one step, but its start key `{}` has {{{own}}} and its {what} `{key}` does not",
                            h.spider, h.start_key
                        ),
                        format!("give `{}` `[keys] mode = \"cluster\"`", h.spider),
                    );
                }
                continue;
            }
            if let Some((what, key)) = keys[..3].iter().find(|(_, k)| hash_tag(k) != tag) {
                self.problem(
                    loc,
                    format!(
                        "on a Redis Cluster this spider's keys are in the slot of {{{tag}}} but `{}`'s {what} `{key}` is not, so one step could not write both",
                        h.spider
                    ),
                    format!("give both spiders the same tag: `[keys] mode = \"cluster\"` and `hash_tag = \"{tag}\"` in each"),
                );
            }
        }
    }
}

/// The relations of `spider`'s own hand-offs: it hands work to each.
pub(super) fn own_relations(spider: &Spider) -> Vec<Relation> {
    let keys = |h: &Handoff| match spider.shards.len() {
        0 | 1 => UpstreamKeys::of(&spider.keys, spider.start.kind),
        _ => UpstreamKeys::of_shards(&spider.keys, &spider.shards, spider.start.kind, &h.spider),
    };
    spider
        .handoffs
        .iter()
        .map(|h| Relation {
            upstream: spider.name.clone(),
            keys: keys(h),
            into: h.upstreams.clone(),
        })
        .collect()
}

/// The relations of `first`'s whole pipeline: its own, then those of the
/// spiders it hands to (read from beside it), and of theirs, each spider
/// once (so a cycle ends). The last stage of a chain then learns of the
/// first from the first's side, before the middle one ever ran. A spider
/// that cannot be read adds nothing (its own workers refuse to start); on
/// a Redis Cluster, a relation outside `first`'s slot is left to the
/// spiders of that slot.
pub(super) fn pipeline(first: &Spider) -> Vec<Relation> {
    let mut relations = first.relations.clone();
    let tag = hash_tag(&first.keys.requests);
    let in_slot = |key: &str| tag == first.keys.requests || hash_tag(key) == tag;
    let mut seen = vec![first.name.clone()];
    let beside = |s: &Spider| -> Vec<(PathBuf, String)> {
        s.handoffs
            .iter()
            .map(|h| {
                (
                    s.source.with_file_name(format!("{}.toml", h.spider)),
                    h.spider.clone(),
                )
            })
            .collect()
    };
    let mut next: VecDeque<(PathBuf, String)> = beside(first).into();
    while let Some((path, name)) = next.pop_front() {
        if seen.contains(&name) {
            continue;
        }
        seen.push(name.clone());
        let Some(spider) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|text| compile_with(&path, &text, true).ok())
            .filter(|s| s.name == name)
        else {
            continue;
        };
        for r in &spider.relations {
            if in_slot(&r.into) && !relations.contains(r) {
                relations.push(r.clone());
            }
        }
        next.extend(beside(&spider));
    }
    relations
}
